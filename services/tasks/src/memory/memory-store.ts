/**
 * Memory records on PostgreSQL or PGlite (table `memories` of the tasks
 * schema, migration `2026_12_28_memories`). Nothing here reads or writes a
 * transcript: memory is kept apart from session history.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { TrellisError } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import type { Kysely, Selectable } from "kysely";
import { newId } from "../domain/ids.js";
import type { MemoryRecord, MemoryScopeName } from "./memory-rules.js";

/** The `memories` table. */
export interface MemoryTable {
  id: string;
  workspace_id: string | null;
  scope: string;
  owner_id: string;
  content: string;
  provenance: string;
  metadata: string;
  idempotency_scope: string;
  idempotency_key: string | null;
  request_hash: string | null;
  created_at: Date;
  updated_at: Date;
}

interface MemoryDatabase {
  memories: MemoryTable;
}

/** What {@link MemoryStore.create} writes: a record but for its id and times. */
export interface NewMemory extends Omit<MemoryRecord, "id" | "createdAt" | "updatedAt"> {
  idempotency?: { key: string; requestHash: string };
}

/** A filter of {@link MemoryStore.list}. */
export interface MemoryFilter {
  /** The workspace's memories and the tenant's. */
  workspaceId: string;
  scope?: MemoryScopeName;
  ownerId?: string;
  /** Newest first: ids before this one. */
  before?: string;
  limit: number;
}

function toRecord(row: Selectable<MemoryTable>): MemoryRecord {
  return {
    id: row.id,
    workspaceId: row.workspace_id,
    scope: row.scope as MemoryScopeName,
    ownerId: row.owner_id,
    content: JSON.parse(row.content) as JsonValue,
    provenance: JSON.parse(row.provenance) as JsonObject,
    metadata: JSON.parse(row.metadata) as JsonObject,
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

/** Memory records of every workspace (callers decide who sees what). */
export class MemoryStore {
  readonly #db: Kysely<MemoryDatabase>;

  constructor(database: Database<unknown>, schema: string) {
    this.#db = (database.kysely as unknown as Kysely<MemoryDatabase>).withSchema(schema);
  }

  /**
   * Stores a record; with an idempotency key already used in its workspace,
   * the record that key made (`replayed`) instead.
   *
   * @throws TrellisError `idempotency_key_reused` when the key came with another request.
   */
  async create(input: NewMemory): Promise<{ memory: MemoryRecord; replayed: boolean }> {
    const scope = input.workspaceId ?? "";
    const now = new Date();
    const row = await this.#db
      .insertInto("memories")
      .values({
        id: newId("mem"),
        workspace_id: input.workspaceId,
        scope: input.scope,
        owner_id: input.ownerId,
        content: JSON.stringify(input.content),
        provenance: JSON.stringify(input.provenance),
        metadata: JSON.stringify(input.metadata),
        idempotency_scope: scope,
        idempotency_key: input.idempotency?.key ?? null,
        request_hash: input.idempotency?.requestHash ?? null,
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc
          .columns(["idempotency_scope", "idempotency_key"])
          .where("idempotency_key", "is not", null)
          .doNothing(),
      )
      .returningAll()
      .executeTakeFirst();
    if (row) return { memory: toRecord(row), replayed: false };
    // The key was used before (possibly by a concurrent twin): answer with its record.
    const earlier = await this.#db
      .selectFrom("memories")
      .selectAll()
      .where("idempotency_scope", "=", scope)
      .where("idempotency_key", "=", input.idempotency?.key ?? "")
      .executeTakeFirstOrThrow();
    if (earlier.request_hash !== (input.idempotency?.requestHash ?? null)) {
      throw new TrellisError({
        reason: "idempotency_key_reused",
        message: "this idempotency key was used with a different memory",
        param: "idempotency_key",
      });
    }
    return { memory: toRecord(earlier), replayed: true };
  }

  async get(id: string): Promise<MemoryRecord | undefined> {
    const row = await this.#db
      .selectFrom("memories")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    return row ? toRecord(row) : undefined;
  }

  /** Newest first. */
  async list(filter: MemoryFilter): Promise<MemoryRecord[]> {
    let query = this.#db
      .selectFrom("memories")
      .selectAll()
      .where((eb) =>
        eb.or([eb("workspace_id", "=", filter.workspaceId), eb("workspace_id", "is", null)]),
      )
      .orderBy("id", "desc")
      .limit(filter.limit);
    if (filter.scope) query = query.where("scope", "=", filter.scope);
    if (filter.ownerId) query = query.where("owner_id", "=", filter.ownerId);
    if (filter.before) query = query.where("id", "<", filter.before);
    return (await query.execute()).map(toRecord);
  }

  /** Whether it existed. */
  async delete(id: string): Promise<boolean> {
    const result = await this.#db.deleteFrom("memories").where("id", "=", id).executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}
