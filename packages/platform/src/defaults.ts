/**
 * The platform's defaults, importable without the platform itself
 * (`@trellis/platform/defaults`): the CLI checks its settings against them
 * before it loads any service.
 */

/**
 * How long an acked durable-consumer position may wait before it is written
 * (1 s): at one turn in flight a shorter timer writes about once per turn;
 * this writes at most once a second. A crash redelivers at most that second
 * of acked events, which the durable consumers take again without effect
 * (receipts: idempotent records; webhooks: one delivery per subscription and
 * event, `on conflict do nothing`).
 */
export const DEFAULT_CONSUMER_POSITION_FLUSH_MS = 1_000;
