/**
 * Registered OAuth2 clients (RFC 6749 §4.4, client credentials). A client is
 * bound to a workspace and to the scopes it may ask for; its secret is a
 * 256-bit random string shown once at registration and stored as SHA-256
 * only (as API keys are: nothing to brute-force, so a fast hash is enough).
 */
import { randomBytes, timingSafeEqual } from "node:crypto";
import { errors } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import type { Kysely } from "kysely";
import { sha256Hex } from "../domain/canonical-json.js";
import { isScope } from "../domain/scopes.js";
import type { GatewayDatabase, OAuthClientRow } from "./schema.js";

/** Prefix of client secrets (recognisable by secret scanners). */
export const clientSecretPrefix = "trellis_cs_";

/** A registered client, without its secret. */
export interface OAuthClientRecord {
  /** The `client_id`. */
  id: string;
  name: string;
  workspaceId: string;
  /** Scopes the client may be granted (named scopes only). */
  scopes: readonly string[];
  /** Actor who registered it. */
  createdBy: string;
  createdAt: Date;
  revokedAt: Date | undefined;
}

/** What to register. */
export interface NewOAuthClient {
  name: string;
  workspaceId: string;
  scopes: readonly string[];
  createdBy: string;
}

/** A freshly registered client: the only time its secret is available. */
export interface CreatedOAuthClient {
  clientSecret: string;
  record: OAuthClientRecord;
}

/** Where OAuth clients live. */
export interface OAuthClientStore {
  create(input: NewOAuthClient): Promise<CreatedOAuthClient>;
  /** The active client with this id and secret, or undefined. */
  authenticate(clientId: string, clientSecret: string): Promise<OAuthClientRecord | undefined>;
  get(id: string): Promise<OAuthClientRecord | undefined>;
  list(options?: { workspaceId?: string; includeRevoked?: boolean }): Promise<OAuthClientRecord[]>;
  /** Revoke a client (its tokens stop working too); false when none was active. */
  revoke(id: string): Promise<boolean>;
}

function hashSecret(secret: string): string {
  return `sha256:${sha256Hex(secret)}`;
}

function toRecord(row: OAuthClientRow): OAuthClientRecord {
  return {
    id: row.id,
    name: row.name,
    workspaceId: row.workspace_id,
    scopes: row.scopes.split(" ").filter((s) => s !== ""),
    createdBy: row.created_by,
    createdAt: row.created_at,
    revokedAt: row.revoked_at ?? undefined,
  };
}

/** {@link OAuthClientStore} on PostgreSQL or PGlite (table `<schema>.oauth_clients`). */
export class PostgresOAuthClientStore implements OAuthClientStore {
  private readonly db: Kysely<GatewayDatabase>;

  constructor(database: Database<unknown>, schema: string) {
    this.db = (database.kysely as unknown as Kysely<GatewayDatabase>).withSchema(schema);
  }

  async create(input: NewOAuthClient): Promise<CreatedOAuthClient> {
    for (const scope of input.scopes) {
      if (!isScope(scope)) throw errors.invalid(`unknown scope ${JSON.stringify(scope)}`, "scopes");
    }
    const clientSecret = clientSecretPrefix + randomBytes(32).toString("base64url");
    const row = await this.db
      .insertInto("oauth_clients")
      .values({
        id: `cli_${randomBytes(10).toString("hex")}`,
        secret_hash: hashSecret(clientSecret),
        name: input.name,
        workspace_id: input.workspaceId,
        scopes: [...new Set(input.scopes)].join(" "),
        created_by: input.createdBy,
        created_at: new Date(),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    return { clientSecret, record: toRecord(row) };
  }

  async authenticate(
    clientId: string,
    clientSecret: string,
  ): Promise<OAuthClientRecord | undefined> {
    if (clientId.length > 200 || clientSecret.length > 512) return undefined;
    const row = await this.db
      .selectFrom("oauth_clients")
      .selectAll()
      .where("id", "=", clientId)
      .where("revoked_at", "is", null)
      .executeTakeFirst();
    if (row === undefined) return undefined;
    const expected = Buffer.from(row.secret_hash);
    const given = Buffer.from(hashSecret(clientSecret));
    return expected.length === given.length && timingSafeEqual(expected, given)
      ? toRecord(row)
      : undefined;
  }

  async get(id: string): Promise<OAuthClientRecord | undefined> {
    const row = await this.db
      .selectFrom("oauth_clients")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    return row === undefined ? undefined : toRecord(row);
  }

  async list(
    options: { workspaceId?: string; includeRevoked?: boolean } = {},
  ): Promise<OAuthClientRecord[]> {
    let query = this.db.selectFrom("oauth_clients").selectAll();
    if (options.workspaceId !== undefined)
      query = query.where("workspace_id", "=", options.workspaceId);
    if (!options.includeRevoked) query = query.where("revoked_at", "is", null);
    const rows = await query.orderBy("created_at").orderBy("id").execute();
    return rows.map(toRecord);
  }

  async revoke(id: string): Promise<boolean> {
    const result = await this.db
      .updateTable("oauth_clients")
      .set({ revoked_at: new Date() })
      .where("id", "=", id)
      .where("revoked_at", "is", null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }
}
