/**
 * ChatService handlers: proto ↔ the turn runner and the listener.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import type {
  ChatService,
  GetHistoryRequest,
  GetHistoryResponseSchema,
  SendStreamingResponseSchema,
} from "@trellis/contracts/chat";
import { errors } from "@trellis/runtime";
import type { ChatConfig } from "../config.js";
import { subscribe } from "./subscribe.js";
import { onBehalfOf, type TasksPort } from "./tasks-port.js";
import { loadHistory, runTurn } from "./turn.js";

/** Dependencies of the chat handlers. */
export interface ChatHandlerDeps {
  port: TasksPort;
  config: ChatConfig;
  /** The host's shutdown signal; long-lived streams end when it fires. */
  closing?: AbortSignal;
}

async function getHistory(
  deps: ChatHandlerDeps,
  request: GetHistoryRequest,
  context: HandlerContext,
): Promise<MessageInitShape<typeof GetHistoryResponseSchema>> {
  if (request.sessionId.trim() === "") {
    throw errors.invalid("session_id must not be empty", "session_id");
  }
  if (request.pageSize < 0) throw errors.invalid("page_size must not be negative", "page_size");
  const options = onBehalfOf(context);
  if (request.pageSize === 0 && request.pageToken === "") {
    return { messages: await loadHistory(deps.port, request.sessionId, options) };
  }
  const page = await deps.port.sessions.listMessages(
    { sessionId: request.sessionId, pageSize: request.pageSize, pageToken: request.pageToken },
    options,
  );
  return {
    messages: page.messages.flatMap((m) => (m.message ? [m.message] : [])),
    nextPageToken: page.nextPageToken,
  };
}

/**
 * The ChatService implementation. Errors from the tasks service propagate as
 * they are: the runtime's error interceptor strips the downstream response's
 * framing headers from any relayed ConnectError.
 */
export function createChatHandler(deps: ChatHandlerDeps): ServiceImpl<typeof ChatService> {
  return {
    async send(request, context) {
      for await (const step of runTurn(deps, request, context, false)) {
        if ("outcome" in step) return { outcome: step.outcome };
      }
      throw new Error("a turn ended without an outcome");
    },
    async *sendStreaming(request, context) {
      for await (const step of runTurn(deps, request, context, true)) {
        const response: MessageInitShape<typeof SendStreamingResponseSchema> =
          "outcome" in step
            ? { kind: { case: "outcome", value: step.outcome } }
            : { kind: { case: "chunk", value: step.chunk } };
        yield response;
      }
    },
    subscribe: (request, context) => subscribe(deps, request, context),
    getHistory: (request, context) => getHistory(deps, request, context),
  };
}
