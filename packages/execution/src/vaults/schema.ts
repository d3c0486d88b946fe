/**
 * The vault tables (schema `adapters`): vault metadata with its access
 * policy, and secrets sealed with the vault key (`vault-key.ts`); a value is
 * never stored in the clear.
 */
import { type Generated, type Kysely, type Migration, sql } from "kysely";

export interface VaultTable {
  /** Unique per scope: another workspace may use the same id. */
  id: string;
  /** The workspace id, "" for a tenant-global vault (the key is (scope, id)). */
  scope: Generated<string>;
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
  /** The vault's scope (see {@link VaultTable.scope}). */
  vault_scope: Generated<string>;
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

/**
 * Vault ids unique per workspace (issue 22): a vault's key becomes (scope,
 * id), scope being its workspace id or "" for a tenant-global vault, so
 * another workspace can neither take an id nor learn that it is used.
 * Secrets follow their vault by (vault_scope, vault_id).
 */
const vaultIdsPerWorkspace: Migration = {
  async up(db: Kysely<unknown>) {
    await sql`alter table vaults add column scope text not null default ''`.execute(db);
    await sql`update vaults set scope = coalesce(workspace_id, '')`.execute(db);
    await sql`alter table vault_secrets add column vault_scope text not null default ''`.execute(
      db,
    );
    await sql`update vault_secrets s set vault_scope = v.scope from vaults v where v.id = s.vault_id`.execute(
      db,
    );
    await sql`alter table vault_secrets drop constraint vault_secrets_vault_id_fkey`.execute(db);
    await sql`alter table vault_secrets drop constraint vault_secrets_pk`.execute(db);
    await sql`alter table vaults drop constraint vaults_pkey`.execute(db);
    await sql`alter table vaults add constraint vaults_pkey primary key (scope, id)`.execute(db);
    await sql`alter table vault_secrets add constraint vault_secrets_pk primary key (vault_scope, vault_id, name)`.execute(
      db,
    );
    await sql`alter table vault_secrets add constraint vault_secrets_vault_fkey
      foreign key (vault_scope, vault_id) references vaults (scope, id) on delete cascade`.execute(
      db,
    );
    // Lookups by id alone (admin and internal callers) find every scope's.
    await sql`create index vaults_id_idx on vaults (id)`.execute(db);
  },
};

/** The adapters service's migrations (schema `adapters`), by name. */
export const adaptersMigrations: Record<string, Migration> = {
  "2026_12_20_create_vaults": createVaults,
  "2027_01_04_vault_ids_per_workspace": vaultIdsPerWorkspace,
};
