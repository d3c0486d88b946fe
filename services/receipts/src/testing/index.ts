/**
 * `@trellis/receipts/testing`: what tests and benchmarks use to drive the
 * receipts pipeline in process — the consumer and processor without the
 * service around them, signing keys and an agent directory that need no
 * storage, and synthetic task events. Never imported by shipped code.
 */
export { startReceiptConsumer } from "../consumer.js";
export type { KeyRing } from "../keys.js";
export { type Delivery, ReceiptProcessor } from "../processor.js";
export { everyAgentKnown, issuer, keyRingOf, newKey, receiptOf } from "./receipt-helpers.js";
export { type TaskScript, taskEvents } from "./task-events.js";
