/**
 * Where agent policies are kept: table `credential_agent_policies` (schema
 * `gateway`), one row per restricted credential (`api_key:<id>` or
 * `oauth_client:<id>`). A policy is written when its credential is created
 * and never changed, so replicas may cache it for as long as they like.
 */
import type { Database } from "@trellis/storage";
import type { ColumnType, Kysely, Migration } from "kysely";
import type { Credential } from "../auth/authenticator.js";
import type { AgentPolicy } from "./agent-policy.js";

/** One restricted credential. `agent_ids` is space-separated. */
export interface CredentialAgentPolicyTable {
  credential: string;
  agent_ids: string;
  created_at: ColumnType<Date, Date, never>;
}

interface PolicyDatabase {
  credential_agent_policies: CredentialAgentPolicyTable;
}

export const agentPolicyMigrations: Record<string, Migration> = {
  "2026_12_10_001_create_credential_agent_policies": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("credential_agent_policies")
        .addColumn("credential", "text", (c) => c.primaryKey())
        .addColumn("agent_ids", "text", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull())
        .execute();
    },
  },
};

/** The policy key of a credential; undefined for one no policy can name (an external token without client). */
export function policyKeyOf(credential: Credential): string | undefined {
  if (credential.kind === "api_key") return `api_key:${credential.keyId}`;
  return credential.clientId === undefined ? undefined : `oauth_client:${credential.clientId}`;
}

/** Cached lookups at most (entries; the cache is emptied when full). */
const cacheLimit = 10_000;

export class AgentPolicyStore {
  readonly #db: Kysely<PolicyDatabase>;
  /** Credential → policy (null: unrestricted). Policies never change, so no invalidation. */
  readonly #cache = new Map<string, AgentPolicy | null>();

  constructor(database: Database<unknown>, schema: string) {
    this.#db = (database.kysely as unknown as Kysely<PolicyDatabase>).withSchema(schema);
  }

  /** Restrict a new credential to `agentIds`. */
  async set(credential: string, agentIds: readonly string[]): Promise<void> {
    await this.#db
      .insertInto("credential_agent_policies")
      .values({ credential, agent_ids: agentIds.join(" "), created_at: new Date() })
      .execute();
    this.#cache.set(credential, { agentIds: [...agentIds] });
  }

  /** The policy of a credential; undefined: unrestricted. */
  async get(credential: string): Promise<AgentPolicy | undefined> {
    const cached = this.#cache.get(credential);
    if (cached !== undefined) return cached ?? undefined;
    const row = await this.#db
      .selectFrom("credential_agent_policies")
      .select("agent_ids")
      .where("credential", "=", credential)
      .executeTakeFirst();
    const policy = row ? { agentIds: row.agent_ids.split(" ").filter((s) => s !== "") } : null;
    if (this.#cache.size >= cacheLimit) this.#cache.clear();
    this.#cache.set(credential, policy);
    return policy ?? undefined;
  }
}
