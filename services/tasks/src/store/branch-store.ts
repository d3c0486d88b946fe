/**
 * Branch records on PostgreSQL / PGlite. A session branch is made by the
 * task store's fork (its own transaction); the record follows in a second
 * one, keyed by the branch id the fork was given, so a retry after a crash
 * between the two finds the fork (same idempotency key) and records it then.
 */
import { create, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { type Branch, type BranchKind, BranchSchema } from "@trellis/contracts/tasks";
import { notFound } from "../domain/errors.js";
import { dataEvent } from "../domain/events.js";
import { type SchemaStore, type SchemaStoreOptions, schemaStore } from "./event-writer.js";
import type { BranchRow, ExtendedDatabase } from "./extended-schema.js";
import { afterSeq, readPage } from "./paging.js";
import { visible } from "./store-context.js";
import type { Page, PageRequest, WriteContext } from "./task-store.js";

/** A branch to record (its fork already made). */
export interface NewBranch {
  id: string;
  workspaceId: string;
  kind: BranchKind;
  baseRef: string;
  parentBranchId: string;
  parentSessionId: string;
  sessionId: string;
  taskId: string;
  forkedFromEventId: string;
  forkedFromMessageId: string;
  forkedMessageCount: bigint;
  metadata?: { [key: string]: JsonValue };
}

/** Options of {@link PostgresBranchStore}. */
export type BranchStoreOptions = SchemaStoreOptions;

/** The port: branch records (scoped like `TaskStore`). */
export interface BranchStore {
  /** Records a branch once (by id); recording it again returns the stored one. */
  record(branch: NewBranch, context: WriteContext): Promise<Branch>;
  get(id: string, scope?: string): Promise<Branch>;
  listOfSession(workspaceId: string, sessionId: string, page: PageRequest): Promise<Page<Branch>>;
}

/** {@link BranchStore} on PostgreSQL / PGlite. */
export class PostgresBranchStore implements BranchStore {
  readonly #store: SchemaStore<ExtendedDatabase>;

  constructor(options: BranchStoreOptions) {
    this.#store = schemaStore(options);
  }

  /**
   * Records a branch once (by id) and emits `branch.created` on the new
   * session; recording it again returns the stored one.
   */
  async record(branch: NewBranch, context: WriteContext): Promise<Branch> {
    await this.#store.write(async (trx, emit) => {
      const inserted = await trx
        .insertInto("branches")
        .values({
          id: branch.id,
          workspace_id: branch.workspaceId,
          kind: branch.kind,
          base_ref: branch.baseRef,
          parent_branch_id: branch.parentBranchId,
          parent_session_id: branch.parentSessionId,
          session_id: branch.sessionId,
          task_id: branch.taskId,
          forked_from_event_id: branch.forkedFromEventId,
          forked_from_message_id: branch.forkedFromMessageId,
          forked_message_count: branch.forkedMessageCount,
          created_by: context.actor.id,
          metadata: JSON.stringify(branch.metadata ?? {}),
        })
        .onConflict((oc) => oc.column("id").doNothing())
        .returning("id")
        .executeTakeFirst();
      if (!inserted) return;
      emit(
        dataEvent(
          { workspaceId: branch.workspaceId, sessionId: branch.sessionId, actor: context.actor },
          EVENT_KIND.branchCreated,
          { object: "branch", id: branch.id },
          "",
          {
            branch_id: branch.id,
            parent_session_id: branch.parentSessionId,
            session_id: branch.sessionId,
            base_ref: branch.baseRef,
            forked_from_event_id: branch.forkedFromEventId,
            forked_from_message_id: branch.forkedFromMessageId,
            forked_message_count: Number(branch.forkedMessageCount),
          },
        ),
      );
    });
    return this.get(branch.id, context.scope);
  }

  /** A branch of the caller's workspace (`resource_not_found` otherwise). */
  async get(id: string, scope?: string): Promise<Branch> {
    const row = await this.#store.db
      .selectFrom("branches")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("branch", id);
    return toBranch(row);
  }

  /** The branches made from a session, oldest first (the caller checked the session). */
  async listOfSession(
    workspaceId: string,
    sessionId: string,
    page: PageRequest,
  ): Promise<Page<Branch>> {
    return readPage(
      page,
      (window) =>
        afterSeq(
          this.#store.db
            .selectFrom("branches")
            .selectAll()
            .where("workspace_id", "=", workspaceId)
            .where("parent_session_id", "=", sessionId),
          window,
        ).execute(),
      (r) => r.seq,
      toBranch,
    );
  }
}

function toBranch(row: BranchRow): Branch {
  return create(BranchSchema, {
    id: row.id,
    workspaceId: row.workspace_id,
    kind: row.kind,
    baseRef: row.base_ref,
    parentBranchId: row.parent_branch_id,
    parentSessionId: row.parent_session_id,
    sessionId: row.session_id,
    taskId: row.task_id,
    forkedFromEventId: row.forked_from_event_id,
    forkedFromMessageId: row.forked_from_message_id,
    forkedMessageCount: row.forked_message_count,
    createdBy: row.created_by,
    mergedInto: row.merged_into,
    createdAt: timestampFromDate(row.created_at),
    updatedAt: timestampFromDate(row.updated_at),
    metadata: row.metadata,
  });
}
