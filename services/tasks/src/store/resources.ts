/**
 * Tasks, outcomes, artifacts and events as resources: reads and listings
 * (one generic paged read, see `paging.ts`) and artifact registration.
 */
import { createHash } from "node:crypto";
import { fromBinary } from "@bufbuild/protobuf";
import { type Event, EventSchema, TaskStatus } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { type Artifact, ArtifactKind, type Outcome, type Task } from "@trellis/contracts/tasks";
import { journalHead, outboxTables } from "@trellis/storage";
import { type Kysely, type SelectQueryBuilder, sql, type Transaction } from "kysely";
import { invalidRequest, notFound, payloadTooLarge } from "../domain/errors.js";
import { dataEvent } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import { jsonText } from "./codec.js";
import { afterSeq, readPage } from "./paging.js";
import { toArtifact, toOutcome, toTask } from "./rows.js";
import type { TaskRow, TasksDatabase } from "./schema.js";
import { type StoreContext, visible } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type {
  Idempotency,
  Page,
  PageRequest,
  ResourceFilter,
  TaskFilter,
  WriteContext,
} from "./task-store.js";

/** Artifact columns without the content bytes (metadata reads never need them). */
const ARTIFACT_COLUMNS = [
  "seq",
  "id",
  "workspace_id",
  "session_id",
  "task_id",
  "kind",
  "name",
  "mime_type",
  "uri",
  "visibility",
  "sha256",
  "size_bytes",
  "metadata",
  "created_at",
] as const;

/**
 * The rows of a listing of outcomes or artifacts that a {@link ResourceFilter}
 * keeps; a caller with a scope sees only its own workspace.
 */
function matching<TB extends "outcomes" | "artifacts", O>(
  query: SelectQueryBuilder<TasksDatabase, TB, O>,
  filter: ResourceFilter,
  scope: string | undefined,
): SelectQueryBuilder<TasksDatabase, TB, O> {
  const workspace = scope ?? filter.workspaceId;
  let kept = query;
  if (workspace) kept = kept.where(sql.ref("workspace_id"), "=", workspace);
  if (filter.sessionId) kept = kept.where(sql.ref("session_id"), "=", filter.sessionId);
  if (filter.taskId) kept = kept.where(sql.ref("task_id"), "=", filter.taskId);
  return kept;
}

declare module "./store-parts.js" {
  interface StoreParts {
    /** Tasks, outcomes, artifacts and events as resources. */
    resources: Resources;
  }
}

/** Reads of tasks, outcomes, artifacts and events; artifact registration. */
export class Resources {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  async taskRow(
    db: Kysely<TasksDatabase> | Transaction<TasksDatabase>,
    id: string,
    scope: string | undefined,
  ): Promise<TaskRow> {
    const row = await db.selectFrom("tasks").selectAll().where("id", "=", id).executeTakeFirst();
    if (!visible(row, scope)) throw notFound("task", id);
    return row;
  }

  async getTask(id: string, scope?: string): Promise<Task> {
    return toTask(await this.taskRow(this.#ctx.db, id, scope));
  }

  async listTasks(filter: TaskFilter, page: PageRequest, scope?: string): Promise<Page<Task>> {
    const workspace = scope ?? filter.workspaceId;
    return readPage(
      page,
      (window) => {
        let query = afterSeq(this.#ctx.db.selectFrom("tasks").selectAll(), window);
        if (workspace) query = query.where("workspace_id", "=", workspace);
        if (filter.sessionId) query = query.where("session_id", "=", filter.sessionId);
        if (filter.parentTaskId) query = query.where("parent_task_id", "=", filter.parentTaskId);
        if (filter.waitingSignalId) {
          const signalId = filter.waitingSignalId;
          query = query.where("run_state", "=", "waiting");
          // Within a session, the label the agent's author wrote names it too (as Deliver takes it).
          query = filter.sessionId
            ? query.where((eb) =>
                eb.or([
                  eb("signal_id", "=", signalId),
                  eb("signal_id", "=", sql<string>`${sql.ref("id")} || ':' || ${signalId}`),
                ]),
              )
            : query.where("signal_id", "=", signalId);
        }
        if (filter.statuses.length > 0) query = query.where("status", "in", filter.statuses);
        return query.execute();
      },
      (r) => r.seq,
      toTask,
    );
  }

  async listOpenChildTasks(parentTaskId: string, scope?: string): Promise<string[]> {
    let query = this.#ctx.db
      .selectFrom("tasks")
      .select("id")
      .where("parent_task_id", "=", parentTaskId)
      .where("status", "not in", [TaskStatus.COMPLETED, TaskStatus.FAILED, TaskStatus.CANCELED])
      .orderBy("seq");
    if (scope) query = query.where("workspace_id", "=", scope);
    return (await query.execute()).map((r) => r.id);
  }

  async findEvent(id: string, scope?: string): Promise<Event | undefined> {
    const row = await outboxTables(this.#ctx.kysely, this.#ctx.outboxSchema)
      .selectFrom("outbox")
      .select(["body", "workspace_id"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) return undefined;
    return fromBinary(EventSchema, row.body);
  }

  async getOutcome(id: string, scope?: string): Promise<Outcome> {
    const read = () =>
      this.#ctx.db.selectFrom("outcomes").selectAll().where("id", "=", id).executeTakeFirst();
    let row = await read();
    if (row === undefined && this.#ctx.journal) {
      // Journal on: the Outcome may be committed but not projected yet.
      await this.#readModelCaughtUp();
      row = await read();
    }
    if (!visible(row, scope)) throw notFound("outcome", id);
    return toOutcome(row);
  }

  /**
   * Journal on: waits until the read model has applied every step committed
   * before this call (read-your-writes for projected rows). A projector that
   * cannot catch up in time fails the read (`deadline_exceeded`), never
   * answers with stale data silently.
   */
  async #readModelCaughtUp(): Promise<void> {
    const journal = this.#ctx.journal;
    if (!journal) return;
    const head = await journalHead(this.#ctx.kysely, this.#ctx.schema);
    await journal.readModel.waitFor(head, { timeoutMs: 10_000 });
  }

  async listOutcomes(
    filter: ResourceFilter,
    page: PageRequest,
    scope?: string,
  ): Promise<Page<Outcome>> {
    // Read-your-writes for every listing (one indexed max() and, when the
    // projector is behind, a wait of at most one batch).
    await this.#readModelCaughtUp();
    return readPage(
      page,
      (window) =>
        matching(
          afterSeq(this.#ctx.db.selectFrom("outcomes").selectAll(), window),
          filter,
          scope,
        ).execute(),
      (r) => r.seq,
      toOutcome,
    );
  }

  async registerArtifact(
    artifact: Artifact,
    content: Uint8Array,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Artifact> {
    const workspaceId = this.#p.directory.workspaceFor(artifact.workspaceId, context);
    if (content.length === 0 && !artifact.uri) {
      throw invalidRequest("an artifact needs content or a uri", "content");
    }
    if (content.length > this.#ctx.maxArtifactBytes) {
      throw payloadTooLarge(
        `artifact content is ${content.length} bytes; the limit is ${this.#ctx.maxArtifactBytes} (register larger content by uri)`,
        "content",
      );
    }
    const id = newId("art");
    const sha256 =
      content.length > 0
        ? `sha256:${createHash("sha256").update(content).digest("hex")}`
        : artifact.sha256;
    const createdId = await this.#p.unit.write(async (tx) => {
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope(workspaceId, context, "RegisterArtifact", ""),
        idempotency,
        id,
      );
      if (earlier) return earlier;
      await this.#p.directory.ensureWorkspace(tx, workspaceId);
      if (artifact.sessionId) {
        const session = await tx.db
          .selectFrom("sessions")
          .select("workspace_id")
          .where("workspace_id", "=", workspaceId)
          .where("id", "=", artifact.sessionId)
          .executeTakeFirst();
        if (!session || session.workspace_id !== workspaceId)
          throw notFound("session", artifact.sessionId);
      }
      if (artifact.taskId) {
        const task = await tx.db
          .selectFrom("tasks")
          .select(["workspace_id", "session_id"])
          .where("id", "=", artifact.taskId)
          .executeTakeFirst();
        if (!task || task.workspace_id !== workspaceId) throw notFound("task", artifact.taskId);
        if (artifact.sessionId && task.session_id !== artifact.sessionId) {
          throw invalidRequest("the task is not in that session", "artifact.task_id");
        }
      }
      await tx.db
        .insertInto("artifacts")
        .values({
          id,
          workspace_id: workspaceId,
          session_id: artifact.sessionId,
          task_id: artifact.taskId,
          kind: artifact.kind === ArtifactKind.UNSPECIFIED ? ArtifactKind.OTHER : artifact.kind,
          name: artifact.name,
          mime_type: artifact.mimeType || "application/octet-stream",
          uri: artifact.uri,
          visibility: artifact.visibility,
          sha256,
          size_bytes: content.length > 0 ? BigInt(content.length) : artifact.sizeBytes,
          content: content.length > 0 ? content : null,
          metadata: jsonText(artifact.metadata),
        })
        .execute();
      this.#p.unit.emit(
        tx,
        dataEvent(
          { workspaceId, sessionId: artifact.sessionId, actor: context.actor },
          EVENT_KIND.artifactCreated,
          { object: "artifact", id },
          artifact.taskId,
          { artifact_id: id, name: artifact.name, sha256, size_bytes: String(content.length) },
        ),
      );
      return id;
    });
    return this.getArtifact(createdId, context.scope);
  }

  async getArtifact(id: string, scope?: string): Promise<Artifact> {
    const row = await this.#ctx.db
      .selectFrom("artifacts")
      .select(ARTIFACT_COLUMNS)
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("artifact", id);
    return toArtifact(row);
  }

  async listArtifacts(
    filter: ResourceFilter,
    page: PageRequest,
    scope?: string,
  ): Promise<Page<Artifact>> {
    return readPage(
      page,
      (window) =>
        matching(
          afterSeq(this.#ctx.db.selectFrom("artifacts").select(ARTIFACT_COLUMNS), window),
          filter,
          scope,
        ).execute(),
      (r) => r.seq,
      toArtifact,
    );
  }

  async getArtifactContent(
    id: string,
    scope?: string,
  ): Promise<{ content: Uint8Array; mimeType: string }> {
    const row = await this.#ctx.db
      .selectFrom("artifacts")
      .select(["workspace_id", "content", "mime_type"])
      .where("id", "=", id)
      .executeTakeFirst();
    if (!visible(row, scope)) throw notFound("artifact", id);
    return { content: row.content ?? new Uint8Array(0), mimeType: row.mime_type };
  }
}
