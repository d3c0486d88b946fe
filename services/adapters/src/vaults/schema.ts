/**
 * The vault tables (schema `adapters`): vault metadata with its access
 * policy, and secrets sealed with the vault key (`vault-key.ts`); a value is
 * never stored in the clear.
 */
import { type Kysely, type Migration, sql } from "kysely";

export interface VaultTable {
  id: string;
  /** Null: tenant-global. */
  workspace_id: string | null;
  provider: string;
  /** JSON array of strings. */
  capabilities: string;
  /** JSON array of agent ids. */
  allowed_agent_ids: string;
  /** JSON object. */
  metadata: string;
  created_by: string;
  created_at: Date;
  updated_at: Date;
}

export interface VaultSecretTable {
  vault_id: string;
  name: string;
  /** `enc:v1:…` (AES-256-GCM). */
  sealed_value: string;
  size_bytes: number;
  created_at: Date;
  updated_at: Date;
}

export interface VaultDatabase {
  vaults: VaultTable;
  vault_secrets: VaultSecretTable;
}

const createVaults: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable("vaults")
      .addColumn("id", "text", (c) => c.primaryKey())
      .addColumn("workspace_id", "text")
      .addColumn("provider", "text", (c) => c.notNull())
      .addColumn("capabilities", "text", (c) => c.notNull())
      .addColumn("allowed_agent_ids", "text", (c) => c.notNull())
      .addColumn("metadata", "text", (c) => c.notNull())
      .addColumn("created_by", "text", (c) => c.notNull())
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .execute();
    await db.schema
      .createIndex("vaults_workspace_idx")
      .on("vaults")
      .columns(["workspace_id", "id"])
      .execute();
    await db.schema
      .createTable("vault_secrets")
      .addColumn("vault_id", "text", (c) => c.notNull().references("vaults.id").onDelete("cascade"))
      .addColumn("name", "text", (c) => c.notNull())
      .addColumn("sealed_value", "text", (c) => c.notNull())
      .addColumn("size_bytes", "integer", (c) => c.notNull())
      .addColumn("created_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addColumn("updated_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addPrimaryKeyConstraint("vault_secrets_pk", ["vault_id", "name"])
      .execute();
  },
  async down(db: Kysely<unknown>) {
    await db.schema.dropTable("vault_secrets").execute();
    await db.schema.dropTable("vaults").execute();
  },
};

/** The adapters service's migrations (schema `adapters`), by name. */
export const adaptersMigrations: Record<string, Migration> = {
  "2026_12_20_create_vaults": createVaults,
};
