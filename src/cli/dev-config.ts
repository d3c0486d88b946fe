/**
 * The environment of `trellis dev`, apart from the server (`dev-server.ts`) so
 * that a malformed variable is named before the services are loaded.
 */
import { env } from "@trellis/runtime";

/**
 * The defaults below are @trellis/platform's `DEFAULT_CONSUMER_POSITION_FLUSH_MS`
 * and `DEFAULT_EVENT_WINDOW`, spelled out so that checking the settings loads
 * no service (test/consumer-position-flush.test.ts holds them equal).
 */
const consumerPositionFlushMs = 1_000;
const eventWindow = 20_000;

/** Env of embedded mode, validated at start. */
export const devConfigSchema = {
  TRELLIS_PORT: env.port().default(8080),
  TRELLIS_HOST: env.string().default("127.0.0.1"),
  TRELLIS_DATA_DIR: env.string().default(".trellis"),
  /** How long durable-consumer positions may wait before they are written (0: every ack). */
  TRELLIS_CONSUMER_POSITION_FLUSH: env
    .duration({ minMs: 0, maxMs: 60_000 })
    .default(consumerPositionFlushMs),
  /** Events the in-process log keeps in memory; older reads go to the outbox table. */
  TRELLIS_EVENT_WINDOW: env.int({ min: 100, max: 10_000_000 }).default(eventWindow),
};
