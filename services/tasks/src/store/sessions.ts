/**
 * Sessions of the tasks store: create, read, list, close, fork and truncate.
 * Every change locks the session row first (see `write-unit.ts`).
 */
import { fromBinary, type JsonValue } from "@bufbuild/protobuf";
import { EventSchema, Role, SessionState } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import type { Session } from "@trellis/contracts/tasks";
import { outboxTables } from "@trellis/storage";
import { type Kysely, sql } from "kysely";
import { DEFAULT_WORKSPACE_ID } from "../domain/defaults.js";
import { conflict, invalidRequest, notFound } from "../domain/errors.js";
import { sessionEvent } from "../domain/events.js";
import { newId } from "../domain/ids.js";
import type { RunState } from "../domain/mailbox.js";
import { forkLength, planTruncation } from "../domain/transcript.js";
import { boundedMetadataColumn, jsonWeight, PAGE_METADATA_BUDGET } from "./bounded-metadata.js";
import { jsonText } from "./codec.js";
import { afterSeq, readPage } from "./paging.js";
import { toSession } from "./rows.js";
import type { SessionRow, TasksDatabase } from "./schema.js";
import { type StoreContext, visible } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type { NewFork, NewSession, Page, PageRequest, WriteContext } from "./task-store.js";
import type { LockedSession, Tx } from "./write-unit.js";

const sessionColumnsButMetadata = [
  "seq",
  "id",
  "workspace_id",
  "state",
  "agent_id",
  "root_session_id",
  "parent_session_id",
  "branch_id",
  "forked_from_event_id",
  "forked_from_message_id",
  "forked_message_count",
  "summary",
  "last_event_id",
  "transcript_epoch",
  "message_count",
  "turn_count",
  "next_queue_seq",
  "created_at",
  "updated_at",
] as const satisfies readonly (keyof SessionRow)[];

const MESSAGE_EVENT_KINDS = [
  EVENT_KIND.userMessage,
  EVENT_KIND.agentMessage,
  EVENT_KIND.toolResult,
  EVENT_KIND.messageAppended,
];

const NOT_DONE: RunState[] = ["queued", "running", "waiting"];

declare module "./store-parts.js" {
  interface StoreParts {
    /** Sessions: create, read, list, close, fork, truncate. */
    sessions: Sessions;
  }
}

/** Sessions (see the module header). */
export class Sessions {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  /**
   * Emits in `tx` the session's event `kind`: it entered its current state
   * from `previous` (UNSPECIFIED: the session is new) by `context`'s actor.
   */
  #emitState(
    tx: Tx,
    session: SessionRow,
    context: WriteContext,
    kind: string,
    reason: string,
    previous: SessionState = SessionState.UNSPECIFIED,
  ): void {
    const scope = this.#p.unit.scopeOf(session, context.actor);
    this.#p.unit.emit(tx, sessionEvent(scope, kind, session.state, previous, reason));
  }

  async createSession(input: NewSession, context: WriteContext): Promise<Session> {
    const workspaceId = this.#p.directory.workspaceFor(input.workspaceId, context);
    const id = input.sessionId || newId("ses");
    return this.#p.unit.write(async (tx) => {
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope(workspaceId, context, "CreateSession", ""),
        input.idempotency,
        id,
      );
      if (earlier) return toSession(await this.#p.unit.lockSession(tx, earlier, workspaceId));
      const session = await this.insertSession(tx, {
        id,
        workspaceId,
        agentId: input.agentId ?? "",
        metadata: input.metadata,
        context,
      });
      if (input.initialMessages.length > 0) {
        await this.#p.transcript.appendMessages(
          tx,
          session,
          input.initialMessages,
          "",
          context.actor,
        );
      }
      return this.#p.unit.saveSession(tx, session);
    });
  }

  async insertSession(
    tx: Tx,
    input: {
      id: string;
      workspaceId: string;
      agentId: string;
      metadata: Record<string, JsonValue> | undefined;
      context: WriteContext;
      fork?: {
        parent: SessionRow;
        branchId: string;
        fromEventId: string;
        /** The parent's last copied message, and how many were copied. */
        fromMessageId?: string;
        messageCount?: bigint;
      };
    },
  ): Promise<LockedSession> {
    await this.#p.directory.ensureWorkspace(tx, input.workspaceId);
    await this.#p.directory.refuseArchived(tx, input.workspaceId);
    if (input.agentId)
      await this.#p.directory.resolveAgent(tx, input.agentId, input.workspaceId, "agent_id");
    const row = await tx.db
      .insertInto("sessions")
      .values({
        id: input.id,
        workspace_id: input.workspaceId,
        state: SessionState.ACTIVE,
        agent_id: input.agentId,
        root_session_id: input.fork ? input.fork.parent.root_session_id : input.id,
        parent_session_id: input.fork?.parent.id ?? "",
        branch_id: input.fork?.branchId ?? "",
        forked_from_event_id: input.fork?.fromEventId ?? "",
        forked_from_message_id: input.fork?.fromMessageId ?? "",
        forked_message_count: input.fork?.messageCount ?? 0n,
        metadata: jsonText(input.metadata),
      })
      .onConflict((oc) => oc.columns(["workspace_id", "id"]).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) throw conflict(`session ${input.id} already exists`, { session_id: input.id });
    this.#emitState(tx, row, input.context, EVENT_KIND.sessionCreated, "created");
    return row;
  }

  /**
   * Session `id` of workspace `scope`; without one, by id alone: the default
   * workspace's session of that id, else the oldest (the rule of
   * `WriteUnit.lockSession`, and of agents in `Directory.getAgent`).
   */
  async getSession(id: string, scope?: string): Promise<Session> {
    return toSession(await this.sessionRow(this.#ctx.db, id, scope));
  }

  /** The row {@link getSession} reads. */
  async sessionRow(
    db: Kysely<TasksDatabase>,
    id: string,
    scope: string | undefined,
  ): Promise<SessionRow> {
    let query = db.selectFrom("sessions").selectAll().where("id", "=", id);
    query =
      scope === undefined
        ? query.orderBy(sql`workspace_id = ${DEFAULT_WORKSPACE_ID}`, "desc").orderBy("seq")
        : query.where("workspace_id", "=", scope);
    const row = await query.limit(1).executeTakeFirst();
    if (!visible(row, scope)) throw notFound("session", id);
    return row;
  }

  async listSessions(
    workspaceId: string,
    page: PageRequest,
    scope?: string,
  ): Promise<Page<Session>> {
    const workspace = scope ?? workspaceId;
    return readPage(
      page,
      (window) => {
        // Every column but metadata, which comes bounded (bounded-metadata.ts).
        let query = afterSeq(
          this.#ctx.db
            .selectFrom("sessions")
            .select(sessionColumnsButMetadata)
            .select(boundedMetadataColumn().as("metadata")),
          window,
        );
        if (workspace) query = query.where("workspace_id", "=", workspace);
        return query.execute() as Promise<SessionRow[]>;
      },
      (r) => r.seq,
      toSession,
      // Fewer sessions on a page whose metadata is large: each value is converted to a Struct.
      { weigh: (r) => jsonWeight(r.metadata), max: PAGE_METADATA_BUDGET },
    );
  }

  async closeSession(
    id: string,
    reason: string,
    context: WriteContext,
  ): Promise<{ session: Session; abort: string[] }> {
    return this.#p.unit.write(async (tx) => {
      const session = await this.#p.unit.lockSession(tx, id, context.scope);
      if (session.state === SessionState.CLOSED) return { session: toSession(session), abort: [] };
      const open = await tx.db
        .selectFrom("tasks")
        .selectAll()
        .where("workspace_id", "=", session.workspace_id)
        .where("session_id", "=", session.id)
        .where("run_state", "in", NOT_DONE)
        .orderBy("queue_seq")
        .execute();
      const abort: string[] = [];
      for (const row of open) {
        const result = await this.#p.mailbox.cancelRow(
          tx,
          session,
          row,
          `session closed${reason ? `: ${reason}` : ""}`,
          context,
        );
        if (result.running) abort.push(row.id);
      }
      const previous = session.state;
      session.state = SessionState.CLOSED;
      this.#emitState(tx, session, context, EVENT_KIND.sessionClosed, reason || "closed", previous);
      return { session: await this.#p.unit.saveSession(tx, session), abort };
    });
  }

  async forkSession(input: NewFork, context: WriteContext): Promise<Session> {
    const id = newId("ses");
    return this.#p.unit.write(async (tx) => {
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope(context.scope ?? "", context, "ForkSession", input.sessionId),
        input.idempotency,
        id,
      );
      if (earlier) return toSession(await this.#p.unit.lockSession(tx, earlier, context.scope));
      const parent = await this.#p.unit.lockSession(tx, input.sessionId, context.scope);
      const count = input.atEventId
        ? await this.#transcriptLengthAt(tx, parent, input.atEventId)
        : input.atOrigin
          ? 0n
          : input.atMessageId
            ? await this.#transcriptLengthThrough(tx, parent, input.atMessageId)
            : forkLength(parent.message_count, input.atMessageCount);
      const fromEventId = input.atEventId || (input.atOrigin ? "" : parent.last_event_id);
      const session = await this.insertFork(tx, parent, {
        id,
        agentId: parent.agent_id,
        metadata: input.metadata,
        branchId: input.branchId || newId("br"),
        fromEventId,
        count,
        note: `forked from session ${parent.id} at ${fromEventId || "its start"} (${count} messages)`,
        context,
      });
      return this.#p.unit.saveSession(tx, session);
    });
  }

  /**
   * Inserts session `input.id` as a fork of `parent` that starts with the
   * parent's first `count` messages, and emits `thread.forked` with `note`:
   * ForkSession and a replay fork alike.
   */
  async insertFork(
    tx: Tx,
    parent: SessionRow,
    input: {
      id: string;
      agentId: string;
      metadata: Record<string, JsonValue> | undefined;
      branchId: string;
      fromEventId: string;
      count: bigint;
      note: string;
      context: WriteContext;
    },
  ): Promise<LockedSession> {
    const session = await this.insertSession(tx, {
      id: input.id,
      workspaceId: parent.workspace_id,
      agentId: input.agentId,
      metadata: input.metadata,
      context: input.context,
      fork: {
        parent,
        branchId: input.branchId,
        fromEventId: input.fromEventId,
        fromMessageId: await this.#messageIdAt(tx, parent, input.count),
        messageCount: input.count,
      },
    });
    await this.#copyHistory(tx, parent, session, input.count);
    this.#emitState(tx, session, input.context, EVENT_KIND.threadForked, input.note);
    return session;
  }

  /** The id of the message just before position `count` ("" for none). */
  async #messageIdAt(
    tx: Tx,
    session: Pick<SessionRow, "workspace_id" | "id">,
    count: bigint,
  ): Promise<string> {
    if (count <= 0n) return "";
    const row = await tx.db
      .selectFrom("messages")
      .select("id")
      .where("workspace_id", "=", session.workspace_id)
      .where("session_id", "=", session.id)
      .where("position", "=", count - 1n)
      .executeTakeFirst();
    return row?.id ?? "";
  }

  /**
   * Gives a new (locked) session the first `count` messages of `parent`: the
   * fork shares the parent's history — same messages, same ids.
   */
  async #copyHistory(
    tx: Tx,
    parent: SessionRow,
    session: LockedSession,
    count: bigint,
  ): Promise<void> {
    if (count <= 0n) return;
    await sql`
      insert into ${sql.id(this.#ctx.schema, "messages")} (id, workspace_id, session_id, position, turn, task_id, role, body, created_at)
      select id, ${session.workspace_id}, ${session.id}, position, turn, task_id, role, body, created_at
      from ${sql.id(this.#ctx.schema, "messages")}
      where workspace_id = ${parent.workspace_id} and session_id = ${parent.id} and position < ${count}
      order by position`.execute(tx.raw);
    const turns = await tx.db
      .selectFrom("messages")
      .select((eb) => eb.fn.countAll<bigint>().as("n"))
      .where("workspace_id", "=", session.workspace_id)
      .where("session_id", "=", session.id)
      .where("role", "in", [Role.USER, Role.AGENT])
      .executeTakeFirstOrThrow();
    session.message_count = count;
    session.turn_count = BigInt(turns.n);
  }

  /** The transcript length up to and including message `messageId` of the session. */
  async #transcriptLengthThrough(tx: Tx, session: SessionRow, messageId: string): Promise<bigint> {
    const row = await tx.db
      .selectFrom("messages")
      .select("position")
      .where("workspace_id", "=", session.workspace_id)
      .where("session_id", "=", session.id)
      .where("id", "=", messageId)
      .executeTakeFirst();
    if (!row) {
      throw invalidRequest(
        `message ${messageId} is not in the transcript of session ${session.id}`,
        "at_message_id",
      );
    }
    return row.position + 1n;
  }

  /**
   * How long the session's transcript was when `eventId` was emitted: one
   * past the position of the last message event at or before it (0 if none).
   * Read from the outbox, where the session's events are in commit order.
   */
  async #transcriptLengthAt(tx: Tx, session: SessionRow, eventId: string): Promise<bigint> {
    const outbox = outboxTables<TasksDatabase>(tx.raw, this.#ctx.outboxSchema);
    const event = await outbox
      .selectFrom("outbox")
      .select(["position", "workspace_id", "session_id"])
      .where("id", "=", eventId)
      .executeTakeFirst();
    if (!event || event.session_id !== session.id || event.workspace_id !== session.workspace_id) {
      throw invalidRequest(
        `event ${eventId} is not an event of session ${session.id}`,
        "at_event_id",
      );
    }
    const last = await outbox
      .selectFrom("outbox")
      .select("body")
      .where("workspace_id", "=", session.workspace_id)
      .where("session_id", "=", session.id)
      .where("position", "<=", event.position)
      .where("kind", "in", MESSAGE_EVENT_KINDS)
      .orderBy("position", "desc")
      .limit(1)
      .executeTakeFirst();
    if (!last) return 0n;
    const payload = fromBinary(EventSchema, last.body).payload?.kind;
    const length = payload?.case === "messageAppended" ? payload.value.position + 1n : 0n;
    // A later truncation may have made the transcript shorter than it was then.
    return length < session.message_count ? length : session.message_count;
  }

  async truncateSession(
    id: string,
    keepTurns: bigint,
    context: WriteContext,
  ): Promise<{ session: Session; dropped: bigint }> {
    return this.#p.unit.write(async (tx) => {
      const session = await this.#p.unit.lockSession(tx, id, context.scope);
      this.#p.transcript.assertOpen(session);
      const running = await tx.db
        .selectFrom("tasks")
        .select("id")
        .where("workspace_id", "=", session.workspace_id)
        .where("session_id", "=", session.id)
        .where("run_state", "in", ["running", "queued"])
        .limit(1)
        .executeTakeFirst();
      if (running) {
        throw conflict(`session ${id} has a turn running or queued; truncate it when idle`, {
          session_id: id,
          task_id: running.id,
        });
      }
      const next = await tx.db
        .selectFrom("messages")
        .select("position")
        .where("workspace_id", "=", session.workspace_id)
        .where("session_id", "=", session.id)
        .where("role", "in", [Role.USER, Role.AGENT])
        .orderBy("position")
        .offset(Number(keepTurns))
        .limit(1)
        .executeTakeFirst();
      const plan = planTruncation(
        { messageCount: session.message_count, turnCount: session.turn_count },
        keepTurns,
        next?.position,
      );
      if (plan.dropped > 0n) {
        await tx.db
          .deleteFrom("messages")
          .where("workspace_id", "=", session.workspace_id)
          .where("session_id", "=", session.id)
          .where("position", ">=", plan.cut)
          .execute();
      }
      session.message_count = plan.messageCount;
      session.turn_count = plan.turnCount;
      if (plan.dropped > 0n) session.transcript_epoch += 1n;
      this.#emitState(
        tx,
        session,
        context,
        EVENT_KIND.sessionTruncated,
        `kept ${plan.turnCount} turns; dropped ${plan.dropped} messages`,
        session.state,
      );
      return { session: await this.#p.unit.saveSession(tx, session), dropped: plan.dropped };
    });
  }
}
