/**
 * The deployment's secret fingerprint key (`SecretFingerprints`,
 * `@trellis/runtime`): one per deployment, stable across restarts, the same
 * in every service that records or compares secret digests (the adapters
 * service's in-process harness, the tasks service's replay planner and
 * executor, and every router that answers remote workers). First match wins:
 *
 * 1. `TRELLIS_FINGERPRINT_KEY`: 32 bytes or more, base64 — an explicit key,
 *    for a deployment that wants its fingerprints to outlive a rotation of
 *    the mesh secret (any mode);
 * 2. distributed mode: derived from the mesh secret (`TRELLIS_MESH_SECRET` /
 *    `_FILE`, which every service of the deployment already shares) with
 *    HKDF-SHA256, info {@link FINGERPRINT_KEY_LABEL} — nothing more to
 *    configure; rotating the mesh secret changes the fingerprints of new
 *    records (old records keep theirs, they just no longer match new ones);
 * 3. embedded mode: a random key made at the first start and kept in the
 *    embedded database (`trellis.deployment_keys`), so it lives exactly as
 *    long as the records it fingerprints: with a data directory across
 *    restarts, in memory for the database's lifetime. (Embedded mesh
 *    credentials are made per process, so they cannot be the source.)
 */
import { randomBytes } from "node:crypto";
import { MIN_FINGERPRINT_KEY_BYTES, SecretFingerprints, TrellisError } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import { sql } from "kysely";
import type { MeshCredentials } from "./mesh.js";

/** Env variable holding an explicit fingerprint key (base64). */
export const fingerprintKeyVariable = "TRELLIS_FINGERPRINT_KEY";

/** HKDF info of the fingerprint key derived from the mesh secret. */
export const FINGERPRINT_KEY_LABEL = "trellis secret fingerprint v1";

/** Name of the fingerprint key's row in the embedded `deployment_keys` table. */
const EMBEDDED_KEY_NAME = "secret_fingerprint";

/**
 * The explicit key of `TRELLIS_FINGERPRINT_KEY`, or undefined when unset.
 *
 * @throws TrellisError `config_invalid` (param `TRELLIS_FINGERPRINT_KEY`) when
 *   it is not base64 of at least 32 bytes; the message never repeats it.
 */
export function fingerprintKeyFromEnv(
  env: Readonly<Record<string, string | undefined>>,
): Buffer | undefined {
  const text = env[fingerprintKeyVariable]?.trim();
  if (text === undefined || text === "") return undefined;
  const key = Buffer.from(text, "base64");
  if (
    !/^[A-Za-z0-9+/]+={0,2}$/.test(text) ||
    text.length % 4 !== 0 ||
    key.byteLength < MIN_FINGERPRINT_KEY_BYTES
  ) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `${fingerprintKeyVariable} must be at least ${MIN_FINGERPRINT_KEY_BYTES} bytes in base64 (e.g. openssl rand -base64 32)`,
      param: fingerprintKeyVariable,
    });
  }
  return key;
}

/** Distributed mode: the explicit key, else the one derived from the mesh secret. */
export function distributedFingerprints(
  env: Readonly<Record<string, string | undefined>>,
  mesh: MeshCredentials,
): SecretFingerprints {
  return new SecretFingerprints(
    fingerprintKeyFromEnv(env) ?? mesh.deriveKey(FINGERPRINT_KEY_LABEL),
  );
}

/** Migration of the embedded `deployment_keys` table (schema `trellis`). */
export const deploymentKeysMigration = {
  "2026_11_23_001_create_deployment_keys": {
    async up(db: import("kysely").Kysely<unknown>) {
      await db.schema
        .createTable("deployment_keys")
        .ifNotExists()
        .addColumn("name", "text", (c) => c.primaryKey())
        // base64
        .addColumn("key", "text", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
        .execute();
    },
  },
};

/**
 * Embedded mode: the explicit key, else the one kept in `<schema>.deployment_keys`
 * (made at the first start; a concurrent first start keeps the first one written).
 */
export async function embeddedFingerprints(
  env: Readonly<Record<string, string | undefined>>,
  db: Database<unknown>,
  schema: string,
): Promise<SecretFingerprints> {
  const explicit = fingerprintKeyFromEnv(env);
  if (explicit) return new SecretFingerprints(explicit);
  const table = sql.id(schema, "deployment_keys");
  await sql`insert into ${table} (name, key) values (${EMBEDDED_KEY_NAME}, ${randomBytes(32).toString("base64")})
    on conflict (name) do nothing`.execute(db.kysely);
  const result = await sql<{ key: string }>`
    select key from ${table} where name = ${EMBEDDED_KEY_NAME}`.execute(db.kysely);
  const stored = result.rows[0]?.key;
  const key = stored === undefined ? undefined : Buffer.from(stored, "base64");
  if (!key || key.byteLength < MIN_FINGERPRINT_KEY_BYTES) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `the embedded database's secret fingerprint key (${schema}.deployment_keys) is damaged`,
    });
  }
  return new SecretFingerprints(key);
}
