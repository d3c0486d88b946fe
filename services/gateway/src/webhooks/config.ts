/**
 * Webhook settings, from the environment.
 *
 * - `TRELLIS_WEBHOOKS_ALLOW_PRIVATE` (default false): allow URLs that resolve
 *   to loopback, link-local or private addresses (local development, tests).
 * - `TRELLIS_WEBHOOK_RETRY_BASE` (default 5s) and `TRELLIS_WEBHOOK_RETRY_MAX`
 *   (default 1h): the n-th retry waits about base·2^(n-1), at most max, with
 *   jitter (a random 50–100 % of it).
 * - `TRELLIS_WEBHOOK_MAX_ATTEMPTS` (default 15): then the delivery is `failed`.
 * - `TRELLIS_WEBHOOK_TIMEOUT` (default 10s): one attempt's deadline.
 * - `TRELLIS_WEBHOOK_POLL` (default 1s): how often due deliveries are looked for
 *   (new ones are sent at once on the replica that queued them; while none
 *   are due, the wait doubles per empty look up to 8 polls, never past
 *   `TRELLIS_WEBHOOK_RETRY_BASE`).
 * - `TRELLIS_WEBHOOK_CONCURRENCY` (default 8): attempts in flight per replica.
 * - `TRELLIS_WEBHOOK_SECRET_KEY` (optional): encrypts signing secrets at rest
 *   (`SecretBox` of `@trellis/runtime`); every replica needs the same value.
 *   Embedded mode without it seals them with a generated key, as vaults do:
 *   `<data dir>/webhook-key` (mode 0600), or in memory for the database's
 *   lifetime. Distributed mode without it stores them as given (warned).
 */
import {
  type ConfigOf,
  env,
  generatedKeyFile,
  loadConfig,
  memoryKey,
  SecretBox,
} from "@trellis/runtime";

export const webhookConfigSchema = {
  TRELLIS_WEBHOOKS_ALLOW_PRIVATE: env.bool().default(false),
  TRELLIS_WEBHOOK_SECRET_KEY: env.string().secret().optional(),
  TRELLIS_WEBHOOK_RETRY_BASE: env.duration({ minMs: 10, maxMs: 3_600_000 }).default(5_000),
  TRELLIS_WEBHOOK_RETRY_MAX: env.duration({ minMs: 10, maxMs: 24 * 3_600_000 }).default(3_600_000),
  TRELLIS_WEBHOOK_MAX_ATTEMPTS: env.int({ min: 1, max: 100 }).default(15),
  TRELLIS_WEBHOOK_TIMEOUT: env.duration({ minMs: 100, maxMs: 120_000 }).default(10_000),
  TRELLIS_WEBHOOK_POLL: env.duration({ minMs: 10, maxMs: 60_000 }).default(1_000),
  TRELLIS_WEBHOOK_CONCURRENCY: env.int({ min: 1, max: 256 }).default(8),
};

export type WebhookConfig = ConfigOf<typeof webhookConfigSchema>;

export function loadWebhookConfig(
  source: Readonly<Record<string, string | undefined>>,
): WebhookConfig {
  return loadConfig(webhookConfigSchema, source);
}

/** The delay before retry number `attempt` (1 = the first retry), with jitter. */
export function retryDelayMs(
  config: WebhookConfig,
  attempt: number,
  random = Math.random(),
): number {
  const exponential = config.TRELLIS_WEBHOOK_RETRY_BASE * 2 ** Math.min(attempt - 1, 30);
  const capped = Math.min(config.TRELLIS_WEBHOOK_RETRY_MAX, exponential);
  return Math.round(capped * (0.5 + random / 2));
}

/** The box webhook signing secrets are sealed with (`TRELLIS_WEBHOOK_SECRET_KEY`; none: stored as given). */
export function webhookSecretBox(material: string | undefined): SecretBox {
  return new SecretBox(material, { keyName: "TRELLIS_WEBHOOK_SECRET_KEY" });
}

/** File name of the generated webhook key in the embedded data directory. */
export const WEBHOOK_KEY_FILE = "webhook-key";

/**
 * The box of webhook signing secrets for a gateway: the operator's key when
 * set; in embedded mode a generated one (data directory file, else in memory
 * for `db`'s lifetime); in distributed mode without a key none (stored as given).
 */
export async function loadWebhookSecretBox(options: {
  mode: "embedded" | "distributed";
  material: string | undefined;
  dataDir?: string | undefined;
  db: object;
}): Promise<SecretBox> {
  if (options.material) return webhookSecretBox(options.material);
  if (options.mode === "distributed") return webhookSecretBox(undefined);
  const key = options.dataDir
    ? await generatedKeyFile(options.dataDir, WEBHOOK_KEY_FILE)
    : memoryKey(options.db, WEBHOOK_KEY_FILE);
  return new SecretBox(key, { keyName: `the generated webhook key (${WEBHOOK_KEY_FILE})` });
}
