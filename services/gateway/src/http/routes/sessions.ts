/** Sessions and their transcripts (messages). */
import { SessionService } from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { messageFromHarn } from "../../domain/harn-input.js";
import { sessionMessageToHarn, sessionToHarn } from "../../domain/harn-json.js";
import { JsonReader } from "../../domain/json-input.js";
import { ensureRunAllowed } from "../../policy/agent-policy.js";
import type { RestCall } from "../context.js";
import type { RestResponse } from "../io.js";
import {
  created,
  ok,
  param,
  queryWorkspace,
  required,
  visibleSession,
  workspaceOf,
} from "./common.js";
import { okPage, pageOf } from "./paging.js";

export async function listSessions(call: RestCall): Promise<RestResponse> {
  const response = await call.ports.clients
    .get(SessionService)
    .listSessions({ workspaceId: queryWorkspace(call), ...pageOf(call) }, call.options());
  return okPage(response.sessions, sessionToHarn, response.nextPageToken);
}

export async function createSession(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const metadata = body.object("metadata");
  const initial = body.objects("initial_messages") ?? [];
  const agentId = body.string("persona_id") ?? "";
  await ensureRunAllowed(call.caller, agentId, async () => "", "persona_id");
  const response = await call.ports.clients.get(SessionService).createSession(
    {
      workspaceId: workspaceOf(call, body.string("workspace_id")),
      agentId,
      initialMessages: initial.map(messageFromHarn),
      idempotencyKey: call.idempotencyKey,
      sessionId: body.string("id") ?? "",
      ...(metadata ? { metadata } : {}),
    },
    call.options(),
  );
  return created(sessionToHarn(required(response.session, "session", "")));
}

export async function getSession(call: RestCall): Promise<RestResponse> {
  return ok(sessionToHarn(await visibleSession(call, param(call, "session_id"))));
}

export async function closeSession(call: RestCall): Promise<RestResponse> {
  const id = param(call, "session_id");
  await visibleSession(call, id);
  const body = JsonReader.body(call.body);
  const { session } = await call.ports.clients
    .get(SessionService)
    .closeSession({ sessionId: id, reason: body.string("reason") ?? "" }, call.options());
  return ok(sessionToHarn(required(session, "session", id)));
}

export async function forkSession(call: RestCall): Promise<RestResponse> {
  const id = param(call, "session_id");
  const source = await visibleSession(call, id);
  // The fork runs the source's agent: a restricted credential must be allowed it.
  await ensureRunAllowed(call.caller, "", async () => source.agentId, "session_id");
  const body = JsonReader.body(call.body);
  const metadata = body.object("metadata");
  const { session } = await call.ports.clients.get(SessionService).forkSession(
    {
      sessionId: id,
      atEventId: body.string("at_event_id") ?? "",
      atMessageCount: BigInt(body.integer("at_message_count") ?? 0),
      atMessageId: body.string("at_message_id") ?? "",
      atCursor: body.string("at_cursor") ?? "",
      branchId: body.string("branch_id") ?? "",
      idempotencyKey: call.idempotencyKey,
      ...(metadata ? { metadata } : {}),
    },
    call.options(),
  );
  return created(sessionToHarn(required(session, "session", "")));
}

export async function truncateSession(call: RestCall): Promise<RestResponse> {
  const id = param(call, "session_id");
  await visibleSession(call, id);
  const body = JsonReader.body(call.body);
  const keep = body.integer("keep_turns");
  if (keep === undefined) throw errors.invalid("missing required field: keep_turns", "keep_turns");
  const { session } = await call.ports.clients
    .get(SessionService)
    .truncateSession(
      { sessionId: id, keepTurns: BigInt(keep), idempotencyKey: call.idempotencyKey },
      call.options(),
    );
  return ok(sessionToHarn(required(session, "session", id)));
}

export async function listSessionMessages(call: RestCall): Promise<RestResponse> {
  const id = param(call, "session_id");
  await visibleSession(call, id);
  const response = await call.ports.clients
    .get(SessionService)
    .listMessages({ sessionId: id, ...pageOf(call) }, call.options());
  return okPage(response.messages, sessionMessageToHarn, response.nextPageToken);
}

export async function appendSessionMessage(call: RestCall): Promise<RestResponse> {
  const id = param(call, "session_id");
  await visibleSession(call, id);
  const body = JsonReader.body(call.body);
  const reader = body.reader("message");
  if (reader === undefined) throw errors.invalid("missing required field: message", "message");
  const { message } = await call.ports.clients
    .get(SessionService)
    .appendMessage(
      { sessionId: id, message: messageFromHarn(reader), idempotencyKey: call.idempotencyKey },
      call.options(),
    );
  return created(sessionMessageToHarn(required(message, "message", "")));
}

export async function getMessage(call: RestCall): Promise<RestResponse> {
  const id = param(call, "message_id");
  const { message } = await call.ports.clients
    .get(SessionService)
    .getMessage({ messageId: id }, call.options());
  const found = required(message, "message", id);
  if (found.sessionId !== "") await visibleSession(call, found.sessionId);
  return ok(sessionMessageToHarn(found));
}
