/**
 * Vaults and their secrets on PostgreSQL or PGlite. Secret values are sealed
 * before they are written and only opened for {@link VaultStore.accessFor}
 * (the harness's policy-checked reads); no other method returns one.
 */
import { randomBytes } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type { VaultGrant } from "@trellis/adapter-sdk";
import { type SecretBox, TrellisError } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import type { Kysely, Selectable } from "kysely";
import {
  ACCESS_TOKEN_NAME,
  type AccessToken,
  grantOf,
  OAUTH_PROVIDER,
  OAUTH_REFRESH,
  OAuthRefreshError,
  OAuthTokens,
} from "./oauth-refresh.js";
import type { VaultDatabase, VaultTable } from "./schema.js";

/** A vault's metadata (never a secret value). */
export interface VaultRecord {
  id: string;
  /** Null: tenant-global. */
  workspaceId: string | null;
  provider: string;
  capabilities: string[];
  allowedAgentIds: string[];
  metadata: JsonObject;
  createdAt: Date;
  updatedAt: Date;
}

/** A stored secret without its value. */
export interface SecretInfo {
  name: string;
  sizeBytes: number;
  createdAt: Date;
  updatedAt: Date;
}

/** What {@link VaultStore.create} writes. */
export interface NewVault {
  /** Caller-chosen id; default a new `vlt_…`. */
  id?: string;
  workspaceId: string | null;
  provider: string;
  capabilities: readonly string[];
  allowedAgentIds: readonly string[];
  metadata: JsonObject;
  createdBy: string;
}

/**
 * What names one vault: its id is unique within its scope — its workspace,
 * or the tenant-global scope (`workspaceId` null) — not across them.
 */
export type VaultKey = Pick<VaultRecord, "id" | "workspaceId">;

/** The stored scope of a vault: its workspace id, "" when tenant-global. */
export function scopeOf(vault: { workspaceId: string | null }): string {
  return vault.workspaceId ?? "";
}

/** A vault's name across scopes (the OAuth token cache's key; ids hold no ":"). */
function cacheKey(vault: VaultKey): string {
  return vault.workspaceId === null ? vault.id : `${vault.workspaceId}:${vault.id}`;
}

/** One vault as an agent's tool call sees it (see {@link VaultStore.accessFor}). */
export type VaultAccess = VaultGrant;

/** The built-in vault provider: secrets sealed in this service's database. */
export const VAULT_PROVIDER = "trellis";
/** Secret operations a vault may allow. */
export const VAULT_CAPABILITIES = ["read", "write"] as const;
/**
 * The providers this service implements, with the capabilities each may
 * have (the first list is also the default). `oauth` keeps a refresh grant
 * and hands out access tokens (`oauth-refresh.ts`).
 */
export const VAULT_PROVIDERS: Readonly<Record<string, readonly string[]>> = {
  [VAULT_PROVIDER]: VAULT_CAPABILITIES,
  [OAUTH_PROVIDER]: [OAUTH_REFRESH, "read", "write"],
};

const ID = /^[A-Za-z0-9_-]{1,64}$/;

function parseList(text: string): string[] {
  const value: unknown = JSON.parse(text);
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === "string") : [];
}

function toRecord(row: Selectable<VaultTable>): VaultRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    provider: row.provider,
    capabilities: parseList(row.capabilities),
    allowedAgentIds: parseList(row.allowed_agent_ids),
    metadata: JSON.parse(row.metadata) as JsonObject,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "23505";
}

export class VaultStore {
  readonly #db: Kysely<VaultDatabase>;

  constructor(
    database: Database<unknown>,
    schema: string,
    private readonly box: SecretBox,
    private readonly oauth: OAuthTokens = new OAuthTokens(),
  ) {
    this.#db = (database.kysely as unknown as Kysely<VaultDatabase>).withSchema(schema);
  }

  /** Whether secrets can be written (a vault key is configured). */
  get canWriteSecrets(): boolean {
    return this.box.canSeal;
  }

  /**
   * @throws TrellisError `conflict` when the id is taken in the same scope
   *   (the same workspace, or tenant-global); `invalid_request` for a bad id.
   */
  async create(input: NewVault): Promise<VaultRecord> {
    const id = input.id || `vlt_${randomBytes(12).toString("hex")}`;
    if (!ID.test(id)) {
      throw new TrellisError({
        reason: "invalid_request",
        message: "a vault id is 1–64 characters of [A-Za-z0-9_-]",
        param: "vault_id",
      });
    }
    const now = new Date();
    try {
      const row = await this.#db
        .insertInto("vaults")
        .values({
          id,
          scope: input.workspaceId ?? "",
          workspace_id: input.workspaceId,
          provider: input.provider,
          capabilities: JSON.stringify(input.capabilities),
          allowed_agent_ids: JSON.stringify(input.allowedAgentIds),
          metadata: JSON.stringify(input.metadata),
          created_by: input.createdBy,
          created_at: now,
          updated_at: now,
        })
        .returningAll()
        .executeTakeFirstOrThrow();
      return toRecord(row);
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      throw new TrellisError({
        reason: "conflict",
        message: `vault ${JSON.stringify(id)} already exists`,
        param: "vault_id",
        domain: "adapters",
      });
    }
  }

  /** The vault `id` of `workspaceId` (null: the tenant-global one). */
  async get(id: string, workspaceId: string | null): Promise<VaultRecord | undefined> {
    const row = await this.#db
      .selectFrom("vaults")
      .selectAll()
      .where("scope", "=", workspaceId ?? "")
      .where("id", "=", id)
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /**
   * A vault named `id` in any scope, for callers that see every workspace
   * (admin, internal): `preferred`'s own first, then the tenant-global one,
   * then the oldest of another workspace.
   */
  async getAny(id: string, preferred: string | undefined): Promise<VaultRecord | undefined> {
    const rows = await this.#db
      .selectFrom("vaults")
      .selectAll()
      .where("id", "=", id)
      .orderBy("created_at")
      .execute();
    const rank = (row: Selectable<VaultTable>) =>
      preferred !== undefined && row.scope === preferred ? 0 : row.scope === "" ? 1 : 2;
    const [best] = rows.sort((a, b) => rank(a) - rank(b));
    return best ? toRecord(best) : undefined;
  }

  /** Sets the given fields; undefined when there is no such vault. */
  async update(
    vault: VaultKey,
    changes: { capabilities?: string[]; allowedAgentIds?: string[]; metadata?: JsonObject },
  ): Promise<VaultRecord | undefined> {
    const row = await this.#db
      .updateTable("vaults")
      .set({
        ...(changes.capabilities ? { capabilities: JSON.stringify(changes.capabilities) } : {}),
        ...(changes.allowedAgentIds
          ? { allowed_agent_ids: JSON.stringify(changes.allowedAgentIds) }
          : {}),
        ...(changes.metadata ? { metadata: JSON.stringify(changes.metadata) } : {}),
        updated_at: new Date(),
      })
      .where("scope", "=", scopeOf(vault))
      .where("id", "=", vault.id)
      .returningAll()
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /** Deletes the vault and its secrets; whether it existed. */
  async delete(vault: VaultKey): Promise<boolean> {
    // Secrets go with it (foreign key on delete cascade).
    this.oauth.forget(cacheKey(vault));
    const result = await this.#db
      .deleteFrom("vaults")
      .where("scope", "=", scopeOf(vault))
      .where("id", "=", vault.id)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /**
   * Vaults by id, after `after`; `workspaceId` undefined: every vault, null:
   * tenant-global ones, a string: that workspace's.
   */
  async list(options: {
    workspaceId: string | null | undefined;
    after: string;
    limit: number;
  }): Promise<VaultRecord[]> {
    let query = this.#db.selectFrom("vaults").selectAll().orderBy("id").limit(options.limit);
    if (options.after) query = query.where("id", ">", options.after);
    if (options.workspaceId === null) query = query.where("workspace_id", "is", null);
    else if (options.workspaceId !== undefined)
      query = query.where("workspace_id", "=", options.workspaceId);
    return (await query.execute()).map(toRecord);
  }

  /**
   * Sets a secret (sealed), returning its description.
   *
   * @throws TrellisError `config_invalid` when no vault key is configured.
   */
  async putSecret(vault: VaultKey, name: string, value: string): Promise<SecretInfo> {
    if (!this.box.canSeal) {
      throw new TrellisError({
        reason: "config_invalid",
        message:
          "vault secrets cannot be stored: no vault key is configured (set TRELLIS_VAULT_KEY or TRELLIS_VAULT_KEY_FILE to 32 bytes of base64)",
        metadata: { setting: "TRELLIS_VAULT_KEY" },
        domain: "adapters",
      });
    }
    // A changed grant: the next token comes from it, not from the cache.
    this.oauth.forget(cacheKey(vault));
    const now = new Date();
    const row = await this.#db
      .insertInto("vault_secrets")
      .values({
        vault_scope: scopeOf(vault),
        vault_id: vault.id,
        name,
        sealed_value: this.box.seal(value),
        size_bytes: Buffer.byteLength(value, "utf8"),
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc.columns(["vault_scope", "vault_id", "name"]).doUpdateSet((eb) => ({
          sealed_value: eb.ref("excluded.sealed_value"),
          size_bytes: eb.ref("excluded.size_bytes"),
          updated_at: eb.ref("excluded.updated_at"),
        })),
      )
      .returning(["name", "size_bytes", "created_at", "updated_at"])
      .executeTakeFirstOrThrow();
    return toInfo(row);
  }

  /** Whether the secret existed. */
  async deleteSecret(vault: VaultKey, name: string): Promise<boolean> {
    this.oauth.forget(cacheKey(vault));
    const result = await this.#db
      .deleteFrom("vault_secrets")
      .where("vault_scope", "=", scopeOf(vault))
      .where("vault_id", "=", vault.id)
      .where("name", "=", name)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  async listSecrets(vault: VaultKey): Promise<SecretInfo[]> {
    const rows = await this.#db
      .selectFrom("vault_secrets")
      .select(["name", "size_bytes", "created_at", "updated_at"])
      .where("vault_scope", "=", scopeOf(vault))
      .where("vault_id", "=", vault.id)
      .orderBy("name")
      .execute();
    return rows.map(toInfo);
  }

  /**
   * The vaults a tool call of `agentId` in `workspaceId` can name (that
   * workspace's and the tenant-global ones; a workspace's vault hides a
   * tenant-global one of the same id), each with its decision under the
   * vault access policy; only an allowed vault's secrets are opened. None
   * when the vault tables do not exist (an embedded deployment without the
   * adapters service).
   */
  async accessFor(workspaceId: string, agentId: string): Promise<Map<string, VaultAccess>> {
    const access = new Map<string, VaultAccess>();
    let rows: Selectable<VaultTable>[];
    try {
      rows = await this.#db
        .selectFrom("vaults")
        .selectAll()
        .where("scope", "in", [workspaceId, ""])
        .execute();
    } catch (error) {
      // No vault tables: the adapters service is not part of this deployment — no vaults.
      if ((error as { code?: unknown } | null)?.code === "42P01") return access;
      throw error;
    }
    // One vault per id: the workspace's own over a tenant-global one.
    const byId = new Map<string, Selectable<VaultTable>>();
    for (const row of rows) {
      if (row.scope === workspaceId || !byId.has(row.id)) byId.set(row.id, row);
    }
    const vaults = [...byId.values()];
    const scopeById = new Map(vaults.map((v) => [v.id, v.scope]));
    const allowed: string[] = [];
    const oauthVaults = new Set(
      vaults.filter((v) => v.provider === OAUTH_PROVIDER).map((v) => v.id),
    );
    for (const row of vaults.map(toRecord)) {
      if (!row.capabilities.includes("read")) {
        access.set(row.id, { allowed: false, reason: `vault ${row.id} does not allow reads` });
      } else if (!row.allowedAgentIds.includes(agentId)) {
        access.set(row.id, {
          allowed: false,
          reason: `vault ${row.id} does not allow agent ${agentId}`,
        });
      } else {
        allowed.push(row.id);
      }
    }
    if (allowed.length === 0) return access;
    const secrets = (
      await this.#db
        .selectFrom("vault_secrets")
        .select(["vault_scope", "vault_id", "name", "sealed_value"])
        .where("vault_scope", "in", [workspaceId, ""])
        .where("vault_id", "in", allowed)
        .execute()
    ).filter((secret) => scopeById.get(secret.vault_id) === secret.vault_scope);
    const byVault = new Map<string, Map<string, string>>(allowed.map((id) => [id, new Map()]));
    const unreadable = new Set<string>();
    for (const secret of secrets) {
      try {
        byVault.get(secret.vault_id)?.set(secret.name, this.box.open(secret.sealed_value));
      } catch {
        unreadable.add(secret.vault_id);
      }
    }
    for (const [id, values] of byVault) {
      if (oauthVaults.has(id) && !unreadable.has(id)) {
        // An OAuth vault lends an access token, never its grant.
        const scope = scopeById.get(id) ?? "";
        access.set(
          id,
          await this.#lendToken({ id, workspaceId: scope === "" ? null : scope }, values),
        );
        continue;
      }
      access.set(
        id,
        unreadable.has(id)
          ? {
              allowed: false,
              reason: `vault ${id}'s secrets cannot be opened with this service's vault key`,
            }
          : { allowed: true, secrets: values },
      );
    }
    return access;
  }

  /** An OAuth vault's grant as a tool sees it: its access token only, or why not. */
  async #lendToken(vault: VaultKey, secrets: ReadonlyMap<string, string>): Promise<VaultAccess> {
    try {
      const token = await this.#token(vault, secrets);
      return { allowed: true, secrets: new Map([[ACCESS_TOKEN_NAME, token.accessToken]]) };
    } catch (error) {
      if (!(error instanceof OAuthRefreshError)) throw error;
      return { allowed: false, reason: error.message };
    }
  }

  async #token(vault: VaultKey, secrets: ReadonlyMap<string, string>): Promise<AccessToken> {
    const found = grantOf(secrets);
    if ("missing" in found) {
      throw new OAuthRefreshError(vault.id, `its grant has no ${found.missing} secret`);
    }
    return this.oauth.token(cacheKey(vault), found.grant, async (refreshToken) => {
      await this.putSecret(vault, "refresh_token", refreshToken);
    });
  }

  /**
   * A fresh access token of OAuth vault `vaultId` for a service of the mesh
   * (a connector): the vault must be `workspaceId`'s or tenant-global, of
   * provider `oauth` with capability `oauth_refresh`.
   *
   * @throws TrellisError `resource_not_found`, `policy_violation`, or
   *   `upstream_unavailable` when the token endpoint refuses.
   */
  async accessToken(workspaceId: string, vaultId: string): Promise<AccessToken> {
    // The workspace's own, else the tenant-global one: never another workspace's.
    const vault = (await this.get(vaultId, workspaceId)) ?? (await this.get(vaultId, null));
    if (!vault) {
      throw new TrellisError({
        reason: "resource_not_found",
        message: `vault ${JSON.stringify(vaultId)} was not found`,
        metadata: { object: "vault", id: vaultId },
      });
    }
    if (vault.provider !== OAUTH_PROVIDER || !vault.capabilities.includes(OAUTH_REFRESH)) {
      throw new TrellisError({
        reason: "policy_violation",
        message: `vault ${vaultId} does not refresh OAuth tokens (provider ${vault.provider})`,
        domain: "adapters",
      });
    }
    const rows = await this.#db
      .selectFrom("vault_secrets")
      .select(["name", "sealed_value"])
      .where("vault_scope", "=", scopeOf(vault))
      .where("vault_id", "=", vault.id)
      .execute();
    const secrets = new Map(rows.map((r) => [r.name, this.box.open(r.sealed_value)]));
    try {
      return await this.#token(vault, secrets);
    } catch (error) {
      if (!(error instanceof OAuthRefreshError)) throw error;
      throw new TrellisError({
        reason: "upstream_unavailable",
        message: error.message,
        domain: "adapters",
      });
    }
  }
}

function toInfo(row: {
  name: string;
  size_bytes: number;
  created_at: Date;
  updated_at: Date;
}): SecretInfo {
  return {
    name: row.name,
    sizeBytes: Number(row.size_bytes),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}
