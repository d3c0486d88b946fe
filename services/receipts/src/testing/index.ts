/**
 * `@trellis/receipts/testing`: what tests and benchmarks use to drive the
 * receipts pipeline in process — the consumer and processor without the
 * service around them (the processor with test defaults), signing keys and
 * an agent directory that need no storage, the receipts tables on an
 * in-memory database, and synthetic task events. Never imported by shipped
 * code.
 */
export { startReceiptConsumer } from "../consumer.js";
export type { KeyRing } from "../keys.js";
export { type Delivery, ReceiptProcessor } from "../processor.js";
export { everyAgentKnown, issuer, keyRingOf, newKey, receiptOf } from "./receipt-helpers.js";
export {
  migrateReceipts,
  openPGliteDatabase,
  openReceiptsPGlite,
  type PGliteDatabase,
  type PGliteInstance,
  type ReceiptsPGlite,
  receiptStoreOn,
} from "./receipts-database.js";
export {
  messageAppended,
  type TaskScript,
  taskEvents,
  toolResultMessage,
} from "./task-events.js";
export { quietLogger, type TestProcessorOptions, testProcessor } from "./test-processor.js";
