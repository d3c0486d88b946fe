/**
 * The gateway's tables (schema `gateway`): API keys, OAuth clients, token
 * signing keys and idempotency records.
 */
import type { ColumnType, Kysely, Migration, Selectable } from "kysely";

/**
 * One API key: table `api_keys`. Only the SHA-256 of the key is stored
 * (`key_hash`, unique); `prefix` is its first characters, enough to tell keys
 * apart in a listing and useless to an attacker. A key is bound to an actor,
 * a workspace and scopes (space-separated; `*` = all). Revoked keys stay for
 * the audit trail with `revoked_at` set.
 */
export interface ApiKeyTable {
  id: string;
  key_hash: string;
  prefix: string;
  name: string;
  actor_id: string;
  workspace_id: string;
  scopes: string;
  created_at: ColumnType<Date, Date, never>;
  revoked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}
/** A row of {@link ApiKeyTable}. */
export type ApiKeyRow = Selectable<ApiKeyTable>;

/**
 * One idempotency record: table `idempotency_keys`, keyed by the SHA-256 of
 * the scope (actor, workspace, method, canonical target, Idempotency-Key).
 * A request claims the row (`in_flight`, with an owner token and a lease)
 * before doing anything, and stores its response (`completed`) when done;
 * `expires_at` is when the record may be forgotten (≥ 24 h after completion).
 */
export interface IdempotencyKeyTable {
  scope_hash: string;
  actor_id: string;
  workspace_id: string;
  method: string;
  target: string;
  idempotency_key: string;
  request_hash: string;
  state: "in_flight" | "completed";
  owner: string;
  lease_until: Date;
  response_status: number | null;
  response_body: string | null;
  response_headers: string | null;
  created_at: ColumnType<Date, Date, never>;
  completed_at: Date | null;
  expires_at: Date;
}
/** A row of {@link IdempotencyKeyTable}. */
export type IdempotencyKeyRow = Selectable<IdempotencyKeyTable>;

/**
 * One registered OAuth2 client (client credentials grant): table
 * `oauth_clients`. Like an API key, only the SHA-256 of its secret is kept; it
 * is bound to a workspace and may ask for a subset of `scopes`
 * (space-separated named scopes).
 */
export interface OAuthClientTable {
  id: string;
  secret_hash: string;
  name: string;
  workspace_id: string;
  scopes: string;
  created_by: string;
  created_at: ColumnType<Date, Date, never>;
  revoked_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
}
/** A row of {@link OAuthClientTable}. */
export type OAuthClientRow = Selectable<OAuthClientTable>;

/**
 * A key the gateway signs access tokens with, when no key is configured
 * (embedded mode): table `signing_keys`, private and public JWK by key id.
 */
export interface SigningKeyTable {
  kid: string;
  alg: string;
  private_jwk: string;
  public_jwk: string;
  created_at: ColumnType<Date, Date, never>;
}
/** A row of {@link SigningKeyTable}. */
export type SigningKeyRow = Selectable<SigningKeyTable>;

/** The gateway schema's tables. */
export interface GatewayDatabase {
  api_keys: ApiKeyTable;
  idempotency_keys: IdempotencyKeyTable;
  oauth_clients: OAuthClientTable;
  signing_keys: SigningKeyTable;
}

/** Migrations of the gateway schema (run by the host in schema `gateway`). */
export const gatewayMigrations: Record<string, Migration> = {
  "2026_11_23_001_create_api_keys": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("api_keys")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("key_hash", "text", (c) => c.notNull().unique())
        .addColumn("prefix", "text", (c) => c.notNull())
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("actor_id", "text", (c) => c.notNull())
        .addColumn("workspace_id", "text", (c) => c.notNull())
        .addColumn("scopes", "text", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull())
        .addColumn("revoked_at", "timestamptz")
        .execute();
      await db.schema
        .createIndex("api_keys_workspace_idx")
        .on("api_keys")
        .columns(["workspace_id", "name"])
        .execute();
    },
  },
  "2026_11_23_002_create_idempotency_keys": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("idempotency_keys")
        .addColumn("scope_hash", "text", (c) => c.primaryKey())
        .addColumn("actor_id", "text", (c) => c.notNull())
        .addColumn("workspace_id", "text", (c) => c.notNull())
        .addColumn("method", "text", (c) => c.notNull())
        .addColumn("target", "text", (c) => c.notNull())
        .addColumn("idempotency_key", "text", (c) => c.notNull())
        .addColumn("request_hash", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("owner", "text", (c) => c.notNull())
        .addColumn("lease_until", "timestamptz", (c) => c.notNull())
        .addColumn("response_status", "integer")
        .addColumn("response_body", "text")
        .addColumn("response_headers", "text")
        .addColumn("created_at", "timestamptz", (c) => c.notNull())
        .addColumn("completed_at", "timestamptz")
        .addColumn("expires_at", "timestamptz", (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex("idempotency_keys_expires_idx")
        .on("idempotency_keys")
        .column("expires_at")
        .execute();
    },
  },
  "2026_11_24_001_create_oauth_clients": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("oauth_clients")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("secret_hash", "text", (c) => c.notNull())
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("workspace_id", "text", (c) => c.notNull())
        .addColumn("scopes", "text", (c) => c.notNull())
        .addColumn("created_by", "text", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull())
        .addColumn("revoked_at", "timestamptz")
        .execute();
      await db.schema
        .createIndex("oauth_clients_workspace_idx")
        .on("oauth_clients")
        .column("workspace_id")
        .execute();
    },
  },
  "2026_11_24_002_create_signing_keys": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("signing_keys")
        .addColumn("kid", "text", (c) => c.primaryKey())
        .addColumn("alg", "text", (c) => c.notNull())
        .addColumn("private_jwk", "text", (c) => c.notNull())
        .addColumn("public_jwk", "text", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull())
        .execute();
    },
  },
};
