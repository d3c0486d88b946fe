/**
 * A session's transcript: appending messages (with their events, written
 * with the session row), listing and reading them, and loading a range for
 * a run.
 */
import { create, fromBinary, type JsonObject } from "@bufbuild/protobuf";
import {
  type Message,
  MessageSchema as MessageSchemaForInput,
  Role,
  SessionState,
} from "@trellis/contracts/core";
import { type SessionMessage, SessionMessageSchema } from "@trellis/contracts/tasks";
import { validateToolCallReference } from "@trellis/messages";
import { conflict, invalidRequest, notFound } from "../domain/errors.js";
import { messageEvent, SYSTEM_ACTOR } from "../domain/events.js";
import { assignTurns } from "../domain/transcript.js";
import { decodeMessage } from "./codec.js";
import { readPage } from "./paging.js";
import { messageRows, toSessionMessage } from "./rows.js";
import type { SessionRow } from "./schema.js";
import { type StoreContext, withIds } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type { Idempotency, Page, PageRequest, WriteContext } from "./task-store.js";
import type { LockedSession, Tx } from "./write-unit.js";

declare module "./store-parts.js" {
  interface StoreParts {
    /** A session's messages: append, list, read, load. */
    transcript: Transcript;
  }
}

/** A session's transcript (see the module header). */
export class Transcript {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  /**
   * llm-provider §3: a tool message answers a tool call of an earlier assistant
   * message of the session (checked under the session lock, so against the
   * transcript it will follow).
   */
  async assertAnswersToolCall(
    tx: Tx,
    session: Pick<SessionRow, "workspace_id" | "id">,
    message: Message,
  ): Promise<void> {
    const rows = await tx.db
      .selectFrom("messages")
      .select("body")
      .where("workspace_id", "=", session.workspace_id)
      .where("session_id", "=", session.id)
      .where("role", "=", Role.ASSISTANT)
      .execute();
    const earlier = rows.map((row) => decodeMessage(row.body));
    const problem = validateToolCallReference(message, earlier, { path: "input" });
    if (problem) throw invalidRequest(problem.message, problem.path);
  }

  assertOpen(session: SessionRow): void {
    if (session.state === SessionState.CLOSED || session.state === SessionState.FAILED) {
      throw conflict(`session ${session.id} is ${SessionState[session.state]}`, {
        session_id: session.id,
        session_state: SessionState[session.state] ?? String(session.state),
      });
    }
  }

  async appendMessage(
    sessionId: string,
    message: Message,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<SessionMessage> {
    const prepared = withIds(message);
    return this.#p.unit.write(async (tx) => {
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope(context.scope ?? "", context, "AppendMessage", sessionId),
        idempotency,
        prepared.id,
      );
      const session = await this.#p.unit.lockSession(tx, sessionId, context.scope);
      if (earlier) {
        const row = await tx.db
          .selectFrom("messages")
          .selectAll()
          .where("workspace_id", "=", session.workspace_id)
          .where("session_id", "=", session.id)
          .where("id", "=", earlier)
          .executeTakeFirst();
        if (row) return toSessionMessage(row);
      }
      this.assertOpen(session);
      const [appended] = await this.appendMessages(tx, session, [prepared], "", context.actor);
      await this.#p.unit.saveSession(tx, session);
      return appended as SessionMessage;
    });
  }

  /** Appends messages at the end of a locked session's transcript, with their events. */
  async appendMessages(
    tx: Tx,
    session: LockedSession,
    messages: readonly Message[],
    taskId: string,
    actor = SYSTEM_ACTOR,
  ): Promise<SessionMessage[]> {
    if (messages.length === 0) return [];
    const prepared = messages.map(withIds);
    const { turns, turnCount } = assignTurns(session.turn_count, prepared);
    const start = session.message_count;
    const rows = messageRows(session, prepared, start, turns, taskId);
    // Written with the session row (see `WriteUnit.saveSession`).
    tx.pendingMessages.push(...rows);
    session.message_count = start + BigInt(rows.length);
    session.turn_count = turnCount;
    const scope = this.#p.unit.scopeOf(session, actor);
    prepared.forEach((message, i) => {
      this.#p.unit.emit(tx, messageEvent(scope, message, start + BigInt(i), taskId));
    });
    return prepared.map((message, i) =>
      create(SessionMessageSchema, {
        message,
        sessionId: session.id,
        position: start + BigInt(i),
        turn: turns[i] as bigint,
        taskId,
      }),
    );
  }

  async listMessages(
    sessionId: string,
    filter: { taskId: string },
    page: PageRequest,
    scope?: string,
  ): Promise<Page<SessionMessage>> {
    const session = await this.#p.sessions.sessionRow(this.#ctx.db, sessionId, scope);
    return readPage(
      page,
      ({ after, limit }) => {
        let query = this.#ctx.db
          .selectFrom("messages")
          .select(["body", "session_id", "position", "turn", "task_id"])
          .where("workspace_id", "=", session.workspace_id)
          .where("session_id", "=", session.id)
          .orderBy("position")
          .limit(limit);
        // Positions start at 0: the token holds position + 1.
        if (after !== undefined) query = query.where("position", ">=", after);
        if (filter.taskId) query = query.where("task_id", "=", filter.taskId);
        return query.execute();
      },
      (r) => r.position + 1n,
      toSessionMessage,
    );
  }

  async getMessage(id: string, scope?: string): Promise<SessionMessage> {
    let query = this.#ctx.db
      .selectFrom("messages as m")
      .innerJoin("sessions as s", (join) =>
        join.onRef("s.workspace_id", "=", "m.workspace_id").onRef("s.id", "=", "m.session_id"),
      )
      .select(["m.body", "m.session_id", "m.position", "m.turn", "m.task_id"])
      .where("m.id", "=", id)
      .orderBy("m.seq")
      .limit(1);
    if (scope !== undefined) query = query.where("s.workspace_id", "=", scope);
    const row = await query.executeTakeFirst();
    if (!row) throw notFound("message", id);
    return toSessionMessage(row);
  }

  /** `workspaceId`: the session's (absent: by id alone, see `Sessions.getSession`). */
  async loadTranscript(
    sessionId: string,
    from: bigint,
    to: bigint,
    workspaceId?: string,
  ): Promise<Message[]> {
    if (to <= from) return [];
    const workspace = workspaceId ?? (await this.#workspaceOf(sessionId));
    let query = this.#ctx.db
      .selectFrom("messages")
      .select("body")
      .where("workspace_id", "=", workspace)
      .where("session_id", "=", sessionId)
      .where("position", "<", to)
      .orderBy("position");
    if (from > 0n) query = query.where("position", ">=", from);
    const rows = await query.execute();
    return rows.map((r) => fromBinary(MessageSchemaForInput, r.body));
  }

  /** The agent's state besides the transcript, as the session's last run left it. */
  async loadAgentState(sessionId: string, workspaceId?: string): Promise<JsonObject | undefined> {
    const workspace = workspaceId ?? (await this.#workspaceOf(sessionId));
    const row = await this.#ctx.db
      .selectFrom("session_states")
      .select("state")
      .where("workspace_id", "=", workspace)
      .where("session_id", "=", sessionId)
      .executeTakeFirst();
    return row?.state;
  }

  /** The workspace of session `id` found by id alone ("" when there is none). */
  async #workspaceOf(id: string): Promise<string> {
    try {
      return (await this.#p.sessions.sessionRow(this.#ctx.db, id, undefined)).workspace_id;
    } catch {
      return "";
    }
  }
}
