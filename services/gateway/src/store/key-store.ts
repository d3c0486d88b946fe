/**
 * API keys (Harn v1 "API key"): `Authorization: Bearer <key>`, bound to an
 * actor, a workspace and scopes. Keys are 256-bit random strings; only their
 * SHA-256 is stored, so a database leak does not leak usable keys (a fast
 * hash is enough for high-entropy secrets — there is nothing to brute-force).
 *
 * The plaintext key exists only in {@link CreatedApiKey.key}, returned once by
 * {@link KeyStore.create}. Nothing here logs it.
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { errors } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import { type Kysely, sql } from "kysely";
import { sha256Hex } from "../domain/canonical-json.js";
import type { ApiKeyRow, GatewayDatabase } from "./schema.js";

/** Prefix of generated keys (recognisable by secret scanners). */
export const apiKeyPrefix = "trellis_sk_";

/** A stored key, without its secret. */
export interface ApiKeyRecord {
  id: string;
  name: string;
  /** The first characters of the key, for telling keys apart. */
  prefix: string;
  actorId: string;
  workspaceId: string;
  scopes: readonly string[];
  createdAt: Date;
  revokedAt: Date | undefined;
}

/** What to create. */
export interface NewApiKey {
  /** Label, e.g. "admin", "ci". */
  name: string;
  actorId: string;
  workspaceId: string;
  scopes: readonly string[];
  /** Import this key instead of generating one (e.g. `TRELLIS_API_KEY`). */
  key?: string;
}

/** A freshly created key: the only time its plaintext is available. */
export interface CreatedApiKey {
  key: string;
  record: ApiKeyRecord;
}

/** Filter of {@link KeyStore.list}. */
export interface ListApiKeysOptions {
  workspaceId?: string;
  name?: string;
  includeRevoked?: boolean;
}

/**
 * Where API keys live. The gateway authenticates through it; the `trellis
 * keys` CLI manages keys through it.
 */
export interface KeyStore {
  create(input: NewApiKey): Promise<CreatedApiKey>;
  /** The active key record for a presented key, or undefined. */
  authenticate(key: string): Promise<ApiKeyRecord | undefined>;
  get(id: string): Promise<ApiKeyRecord | undefined>;
  list(options?: ListApiKeysOptions): Promise<ApiKeyRecord[]>;
  /** Revoke a key; false when there was no active key with that id. */
  revoke(id: string): Promise<boolean>;
}

/**
 * The channel {@link KeyStore.revoke} notifies (in the revoking transaction;
 * payload: the key id) so that every gateway replica drops its cached keys
 * (see `ApiKeyCache`).
 */
export const apiKeyRevokedChannel = "trellis_api_key_revoked";

/** A new random key: `trellis_sk_` + 43 base64url characters (256 bits). */
export function generateApiKey(): string {
  return apiKeyPrefix + randomBytes(32).toString("base64url");
}

/** The stored form of a key: `sha256:<hex>`. */
export function hashApiKey(key: string): string {
  return `sha256:${sha256Hex(key)}`;
}

/** Keys must be printable ASCII without spaces (they travel in a header). */
export function isWellFormedApiKey(key: string): boolean {
  return /^[\x21-\x7e]{8,512}$/.test(key);
}

function displayPrefix(key: string): string {
  const body = key.startsWith(apiKeyPrefix) ? key.slice(apiKeyPrefix.length) : key;
  return `${key.startsWith(apiKeyPrefix) ? apiKeyPrefix : ""}${body.slice(0, 4)}`;
}

function toRecord(row: ApiKeyRow): ApiKeyRecord {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    actorId: row.actor_id,
    workspaceId: row.workspace_id,
    scopes: row.scopes.split(" ").filter((s) => s !== ""),
    createdAt: row.created_at,
    revokedAt: row.revoked_at ?? undefined,
  };
}

/** {@link KeyStore} on PostgreSQL or PGlite (table `<schema>.api_keys`). */
export class PostgresKeyStore implements KeyStore {
  private readonly db: Kysely<GatewayDatabase>;
  private readonly table;

  constructor(database: Database<unknown>, schema: string) {
    this.db = (database.kysely as unknown as Kysely<GatewayDatabase>).withSchema(schema);
    this.table = sql.id(schema, "api_keys");
  }

  async create(input: NewApiKey): Promise<CreatedApiKey> {
    const key = input.key ?? generateApiKey();
    if (!isWellFormedApiKey(key)) {
      throw errors.invalid("an API key must be 8–512 printable characters without spaces");
    }
    for (const scope of input.scopes) {
      if (!/^[\x21-\x7e]+$/.test(scope))
        throw errors.invalid(`invalid scope ${JSON.stringify(scope)}`);
    }
    const row = await this.db
      .insertInto("api_keys")
      .values({
        id: `key_${randomBytes(8).toString("hex")}`,
        key_hash: hashApiKey(key),
        prefix: displayPrefix(key),
        name: input.name,
        actor_id: input.actorId,
        workspace_id: input.workspaceId,
        scopes: input.scopes.join(" "),
        created_at: new Date(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { key, record: toRecord(row) };
  }

  async authenticate(key: string): Promise<ApiKeyRecord | undefined> {
    if (!isWellFormedApiKey(key)) return undefined;
    const hash = hashApiKey(key);
    const row = await this.db
      .selectFrom("api_keys")
      .selectAll()
      .where("key_hash", "=", hash)
      .where("revoked_at", "is", null)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    // The lookup was by hash already; compare in constant time anyway.
    const a = Buffer.from(row.key_hash);
    const b = Buffer.from(hash);
    return a.length === b.length && timingSafeEqual(a, b) ? toRecord(row) : undefined;
  }

  async get(id: string): Promise<ApiKeyRecord | undefined> {
    const row = await this.db
      .selectFrom("api_keys")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    return row === undefined ? undefined : toRecord(row);
  }

  async list(options: ListApiKeysOptions = {}): Promise<ApiKeyRecord[]> {
    let query = this.db.selectFrom("api_keys").selectAll();
    if (options.workspaceId !== undefined)
      query = query.where("workspace_id", "=", options.workspaceId);
    if (options.name !== undefined) query = query.where("name", "=", options.name);
    if (!options.includeRevoked) query = query.where("revoked_at", "is", null);
    const rows = await query.orderBy("created_at").orderBy("id").execute();
    return rows.map(toRecord);
  }

  async revoke(id: string): Promise<boolean> {
    // One statement: the update and, when it revoked something, the notice
    // to every replica's key cache (delivered when the statement commits).
    const result = await sql<{ revoked: bigint }>`
      with revoked as (
        update ${this.table} set revoked_at = ${new Date()}
        where id = ${id} and revoked_at is null
        returning id)
      select count(*) as revoked, max(pg_notify(${apiKeyRevokedChannel}, revoked.id)::text) as notified
      from revoked`.execute(this.db);
    return (result.rows[0]?.revoked ?? 0n) > 0n;
  }
}
