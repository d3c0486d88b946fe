/**
 * Settings of the receipts service, read from the host's environment once
 * when the service is built (handlers never read env).
 *
 * | variable | meaning | default |
 * |---|---|---|
 * | `TRELLIS_RECEIPT_SIGNING_KEY` | Ed25519 private key, PKCS#8 PEM (or a path to one) | embedded: generated once and kept in the data directory (0600), else in the database |
 * | `TRELLIS_RECEIPT_KEY_ID` | key id of that key | derived from the public key (`ed25519-<16 hex>`) |
 * | `TRELLIS_RECEIPT_OLD_PUBLIC_KEYS` | retired public keys that must keep verifying: JSON `{"<key id>": "<PEM or JWK>"}` or a JWKS `{"keys": [{"kid", "kty", "crv", "x"}]}` | none |
 * | `TRELLIS_RECEIPT_ISSUER_ID` | `issuer.id` of issued receipts | `trellis` |
 * | `TRELLIS_RECEIPT_ISSUER_NAME` | `issuer.name` | `Trellis` |
 * | `TRELLIS_RECEIPT_SCHEMA_FILE` | path of `receipt-2026-04-25.schema.json`; verification then also validates against it | unset (not checked) |
 * | `TRELLIS_RECEIPT_GAP_WAIT` | how long a terminal event waits for missing earlier events of its task before the receipt is issued without them | `30s` |
 * | `TRELLIS_RECEIPT_MODEL_PRICES` | model prices for `cost`: JSON `{"<provider>/<model>[*]": {"input_usd_per_mtok": n, "output_usd_per_mtok": n}}` (see `domain/pricing.ts`); a call it does not price costs 0 with `pricing: unknown` | none |
 * | `TRELLIS_RECEIPT_BATCH_LINGER` | how long a batch of events that issues a receipt waits for more events so they share its statement (group commit); a receipt appears up to this much after its task's end; `0` writes at once; at most `1s` | `20ms` |
 * | `TRELLIS_RECEIPT_ACK_WAIT` | the consumer's ack wait: an event handed out but not acknowledged by a replica that stopped or crashed comes back after this long (a live replica keeps what it holds with in-progress acks) | `4s` |
 *
 * Every public key ever used is also kept in the `signing_keys` table, so
 * rotating `TRELLIS_RECEIPT_SIGNING_KEY` keeps old receipts verifiable even
 * without `TRELLIS_RECEIPT_OLD_PUBLIC_KEYS`.
 */
import { readFileSync } from "node:fs";
import { env, loadConfig, TrellisError } from "@trellis/runtime";
import { type PriceTable, PriceTableError, parsePriceTable } from "./domain/pricing.js";
import { createSchemaValidator, type SchemaValidator } from "./domain/schema.js";

/**
 * Default ack wait of the receipts consumer. Short, so that after a crash
 * (kill -9) the events the dead replica held come back within seconds — it
 * was 30 s, and catching up after a crash took as long; a live replica
 * renews what it holds (`keepAliveMs`), so a slow batch is not redelivered.
 */
export const DEFAULT_ACK_WAIT_MS = 4_000;

/** Events the consumer handles in one transaction at most (default of its `batchSize`). */
export const DEFAULT_BATCH_SIZE = 256;

/** How long a consumer batch that issues nothing waits for more events (default of its `lingerMs`). */
export const DEFAULT_LINGER_MS = 50;

/**
 * Default of how long the consumer's batch that issues a receipt waits for
 * more events (`TRELLIS_RECEIPT_BATCH_LINGER`, the consumer's
 * `issueLingerMs`): about one turn at one in flight, so consecutive turns
 * share a statement; short beside the client's first poll for the receipt.
 */
export const DEFAULT_ISSUE_LINGER_MS = 20;

/** Largest `TRELLIS_RECEIPT_BATCH_LINGER`. */
export const MAX_ISSUE_LINGER_MS = 1_000;

/**
 * Longest `lingerMs` / `issueLingerMs` the consumer accepts when built in
 * code (tests, bench); what the environment sets is held to
 * {@link MAX_ISSUE_LINGER_MS}.
 */
export const MAX_LINGER_OPTION_MS = 60_000;

/** Environment variables the receipts service reads. */
export const receiptsConfigSchema = {
  TRELLIS_RECEIPT_SIGNING_KEY: env.string().optional().secret(),
  TRELLIS_RECEIPT_KEY_ID: env.string().optional(),
  TRELLIS_RECEIPT_OLD_PUBLIC_KEYS: env.string().optional(),
  TRELLIS_RECEIPT_ISSUER_ID: env.string().default("trellis"),
  TRELLIS_RECEIPT_ISSUER_NAME: env.string().default("Trellis"),
  TRELLIS_RECEIPT_SCHEMA_FILE: env.string().optional(),
  TRELLIS_RECEIPT_GAP_WAIT: env.duration().default(30_000),
  TRELLIS_RECEIPT_ACK_WAIT: env.duration({ minMs: 1_000 }).default(DEFAULT_ACK_WAIT_MS),
  TRELLIS_RECEIPT_BATCH_LINGER: env
    .duration({ maxMs: MAX_ISSUE_LINGER_MS })
    .default(DEFAULT_ISSUE_LINGER_MS),
  TRELLIS_RECEIPT_MODEL_PRICES: env.string().optional(),
};

/** The receipts service's validated settings. */
export interface ReceiptsConfig {
  /** PKCS#8 PEM of the signing key, when configured. */
  signingKeyPem?: string;
  keyId?: string;
  /** Retired public keys by key id (PEM or JWK text). */
  oldPublicKeys: Record<string, string>;
  issuer: { id: string; name: string; version: string };
  /** JSON Schema validation of receipts, when a schema file is configured. */
  validateSchema?: SchemaValidator;
  gapWaitMs: number;
  ackWaitMs: number;
  /** The consumer's `issueLingerMs` (`TRELLIS_RECEIPT_BATCH_LINGER`). */
  batchLingerMs: number;
  /** Model prices for receipts' cost (undefined: every model call is priced `unknown`). */
  prices?: PriceTable;
}

function invalid(variable: string, message: string, cause?: unknown): TrellisError {
  return new TrellisError({
    reason: "config_invalid",
    message: `${variable}: ${message}`,
    param: variable,
    ...(cause ? { cause } : {}),
  });
}

function parseOldKeys(raw: string | undefined): Record<string, string> {
  if (!raw) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (error) {
    throw invalid("TRELLIS_RECEIPT_OLD_PUBLIC_KEYS", "is not JSON", error);
  }
  const out: Record<string, string> = {};
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw invalid("TRELLIS_RECEIPT_OLD_PUBLIC_KEYS", "must be a JSON object");
  }
  const keys = (parsed as { keys?: unknown }).keys;
  if (Array.isArray(keys)) {
    for (const jwk of keys) {
      const kid = (jwk as { kid?: unknown }).kid;
      if (typeof kid !== "string" || kid === "") {
        throw invalid("TRELLIS_RECEIPT_OLD_PUBLIC_KEYS", "every JWKS key needs a kid");
      }
      out[kid] = JSON.stringify(jwk);
    }
    return out;
  }
  for (const [kid, key] of Object.entries(parsed)) {
    out[kid] = typeof key === "string" ? key : JSON.stringify(key);
  }
  return out;
}

/**
 * Read and validate the receipts settings.
 *
 * @throws TrellisError `config_invalid` naming the variable.
 */
export function loadReceiptsConfig(
  source: Readonly<Record<string, string | undefined>>,
): ReceiptsConfig {
  const raw = loadConfig(receiptsConfigSchema, source);
  let signingKeyPem = raw.TRELLIS_RECEIPT_SIGNING_KEY;
  if (signingKeyPem && !signingKeyPem.includes("-----BEGIN")) {
    try {
      signingKeyPem = readFileSync(signingKeyPem, "utf8");
    } catch (error) {
      throw invalid(
        "TRELLIS_RECEIPT_SIGNING_KEY",
        "is neither a PEM key nor a readable file",
        error,
      );
    }
  }
  let validateSchema: SchemaValidator | undefined;
  if (raw.TRELLIS_RECEIPT_SCHEMA_FILE) {
    try {
      validateSchema = createSchemaValidator(
        JSON.parse(readFileSync(raw.TRELLIS_RECEIPT_SCHEMA_FILE, "utf8")) as object,
      );
    } catch (error) {
      throw invalid("TRELLIS_RECEIPT_SCHEMA_FILE", "cannot be read as a JSON Schema", error);
    }
  }
  let prices: PriceTable | undefined;
  if (raw.TRELLIS_RECEIPT_MODEL_PRICES) {
    try {
      prices = parsePriceTable(raw.TRELLIS_RECEIPT_MODEL_PRICES);
    } catch (error) {
      if (!(error instanceof PriceTableError)) throw error;
      throw invalid("TRELLIS_RECEIPT_MODEL_PRICES", error.message);
    }
  }
  return {
    ...(signingKeyPem ? { signingKeyPem } : {}),
    ...(prices ? { prices } : {}),
    ...(raw.TRELLIS_RECEIPT_KEY_ID ? { keyId: raw.TRELLIS_RECEIPT_KEY_ID } : {}),
    oldPublicKeys: parseOldKeys(raw.TRELLIS_RECEIPT_OLD_PUBLIC_KEYS),
    issuer: {
      id: raw.TRELLIS_RECEIPT_ISSUER_ID,
      name: raw.TRELLIS_RECEIPT_ISSUER_NAME,
      version: "agents-protocol-2026-04-25",
    },
    ...(validateSchema ? { validateSchema } : {}),
    gapWaitMs: raw.TRELLIS_RECEIPT_GAP_WAIT,
    ackWaitMs: raw.TRELLIS_RECEIPT_ACK_WAIT,
    batchLingerMs: raw.TRELLIS_RECEIPT_BATCH_LINGER,
  };
}
