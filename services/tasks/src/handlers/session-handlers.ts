/** SessionService: sessions, their lineage and their transcripts. */
import type { ServiceImpl } from "@connectrpc/connect";
import { type Message, Role } from "@trellis/contracts/core";
import {
  AppendMessageRequestSchema,
  CreateSessionRequestSchema,
  ForkSessionRequestSchema,
  type SessionService,
} from "@trellis/contracts/tasks";
import { validateChatMessage } from "@trellis/messages";
import { invalidRequest, notFound } from "../domain/errors.js";
import { cancelChildren, openTaskIds } from "./cancel.js";
import {
  type HandlerDeps,
  idempotencyOf,
  pageOf,
  scopeOf,
  workspaceOfRequest,
  writeContext,
} from "./common.js";

const ANY_ROLE = [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.AGENT];

/** Shape-check a message a client appends (llm-provider §3 rules, every role allowed). */
export function checkMessage(message: Message | undefined, path: string): Message {
  if (!message) throw invalidRequest(`${path} is required`, path);
  const problem = validateChatMessage(message, { path, allowedRoles: ANY_ROLE });
  if (problem) throw invalidRequest(problem.message, problem.path);
  return message;
}

export function createSessionHandlers(deps: HandlerDeps): ServiceImpl<typeof SessionService> {
  const { store, runner } = deps;
  return {
    async createSession(request, context) {
      const initialMessages = request.initialMessages.map((m, i) =>
        checkMessage(m, `initial_messages[${i}]`),
      );
      const idempotency = idempotencyOf(
        CreateSessionRequestSchema,
        request,
        request.idempotencyKey,
      );
      const session = await store.createSession(
        {
          ...(request.sessionId ? { sessionId: request.sessionId } : {}),
          workspaceId: workspaceOfRequest(context, request.workspaceId),
          agentId: request.agentId,
          initialMessages,
          ...(request.metadata ? { metadata: request.metadata } : {}),
          ...(idempotency ? { idempotency } : {}),
        },
        writeContext(context),
      );
      return { session };
    },
    async getSession(request, context) {
      // Session ids are unique per workspace: a caller bound to none may name it.
      const scope = scopeOf(context);
      if (scope !== undefined && request.workspaceId && request.workspaceId !== scope) {
        throw notFound("session", request.sessionId);
      }
      return {
        session: await store.getSession(
          request.sessionId,
          scope ?? (request.workspaceId || undefined),
        ),
      };
    },
    async listSessions(request, context) {
      const page = await store.listSessions(
        workspaceOfRequest(context, request.workspaceId),
        pageOf(request),
        scopeOf(context),
      );
      return { sessions: page.items, nextPageToken: page.nextPageToken };
    },
    async closeSession(request, context) {
      const write = writeContext(context);
      // Closing cancels the session's open tasks, and with them the tasks they delegated to.
      const target = await store.getSession(request.sessionId, write.scope);
      const open = await openTaskIds(deps, target.workspaceId, target.id, write.scope);
      const { session, abort } = await store.closeSession(request.sessionId, request.reason, write);
      for (const id of abort) runner.abort(id, "the session was closed");
      await cancelChildren(deps, open, write, context.signal);
      return { session };
    },
    async forkSession(request, context) {
      const idempotency = idempotencyOf(ForkSessionRequestSchema, request, request.idempotencyKey);
      const session = await store.forkSession(
        {
          sessionId: request.sessionId,
          // A stream cursor is an event id ("origin": before the first event).
          atEventId: request.atEventId || (request.atCursor === "origin" ? "" : request.atCursor),
          atOrigin: !request.atEventId && request.atCursor === "origin",
          atMessageCount: request.atMessageCount,
          atMessageId: request.atMessageId,
          branchId: request.branchId,
          ...(request.metadata ? { metadata: request.metadata } : {}),
          ...(idempotency ? { idempotency } : {}),
        },
        writeContext(context),
      );
      return { session };
    },
    async truncateSession(request, context) {
      const { session, dropped } = await store.truncateSession(
        request.sessionId,
        request.keepTurns,
        writeContext(context),
      );
      return { session, droppedMessages: dropped };
    },
    async appendMessage(request, context) {
      const message = checkMessage(request.message, "message");
      const appended = await store.appendMessage(
        request.sessionId,
        message,
        idempotencyOf(AppendMessageRequestSchema, request, request.idempotencyKey),
        writeContext(context),
      );
      return { message: appended };
    },
    async listMessages(request, context) {
      const page = await store.listMessages(
        request.sessionId,
        { taskId: request.taskId },
        pageOf(request),
        scopeOf(context),
      );
      return { messages: page.items, nextPageToken: page.nextPageToken };
    },
    async getMessage(request, context) {
      return { message: await store.getMessage(request.messageId, scopeOf(context)) };
    },
  };
}
