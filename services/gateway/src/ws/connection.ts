/**
 * One WebSocket session: server event frames from the session's (or task's)
 * event log, cursor resume, heartbeats, and client commands that run the same
 * code as the REST writes they stand for.
 *
 * Resume: the cursor (`?cursor=`, `?after_event_id=` or `Last-Event-ID` on the
 * upgrade request) is an event id. History after it is read in pages and sent
 * with `replayed: true`; a `replay_complete` frame follows; then the live
 * stream continues after the last event sent, so nothing is missed or sent
 * twice. Without a cursor the whole history is replayed first.
 *
 * Heartbeats: every `TRELLIS_SSE_HEARTBEAT` the server sends a WebSocket ping
 * and a `heartbeat` frame (with the current cursor); a client that has not
 * answered the previous ping is disconnected.
 *
 * Commands run one at a time in arrival order. A bad frame gets an `error`
 * frame with the Harn error envelope and the connection stays open. The
 * credential is checked again before every command, so a revoked key or an
 * expired token stops working on an open socket too (close code 4401).
 */
import { randomUUID } from "node:crypto";
import { type IncomingMessage, ServerResponse } from "node:http";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import type { Event } from "@trellis/contracts/core";
import { EventService } from "@trellis/contracts/tasks";
import { type Caller, setCallerHeaders } from "@trellis/platform";
import { inputRejectedByDatabase, requestIdHeader, TrellisError } from "@trellis/runtime";
import type { WebSocket } from "ws";
import { authFailureMessage } from "../auth/authenticator.js";
import { authorize, restRuleOf } from "../auth/scope-table.js";
import { canonicalJson, sha256Hex } from "../domain/canonical-json.js";
import { type HarnErrorResponse, harnError, toHarnError } from "../domain/errors.js";
import { eventToHarn } from "../domain/harn-json.js";
import type { GatewayDeps, RestCall, RouteSpec } from "../http/context.js";
import { errorResponse, parseJsonBody, type RestResponse } from "../http/io.js";
import { isReplayable } from "../http/rest-handler.js";
import { type IdempotencyScope, scopeHash } from "../store/idempotency-store.js";
import { UiProjector } from "../ui/projection/projector.js";
import { frameIdOf, parseClientFrame, type WsCommand } from "./frames.js";

/** What a connection streams and acts on. */
export interface WsTarget {
  sessionId: string;
  /** Set for a task-scoped connection (`/v1/tasks/{id}/stream`). */
  taskId?: string;
}

/** Everything a connection is given at the upgrade. */
export interface WsConnectionOptions {
  ws: WebSocket;
  req: IncomingMessage;
  deps: GatewayDeps;
  caller: Caller;
  /** The Authorization header of the upgrade (checked again before each command). */
  authorization: string | undefined;
  target: WsTarget;
  cursor: string;
  /** POST routes by path pattern (the commands' implementations). */
  routes: ReadonlyMap<string, RouteSpec>;
  /** Send no more than this many bytes ahead of the client before waiting. */
  highWaterMark?: number;
}

/** Frames per second one connection may send before frames are refused. */
export const maxFramesPerSecond = 100;

// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
const controlChars = /[\u0000-\u001f\u007f]/;

/** Serve one accepted WebSocket until it closes. */
export function serveWebSocket(options: WsConnectionOptions): void {
  const { ws, deps, target } = options;
  const highWaterMark = options.highWaterMark ?? 1 << 20;
  const abort = new AbortController();
  let caller = options.caller;
  let cursor = options.cursor;
  let alive = true;
  let queue: Promise<void> = Promise.resolve();
  const projector = new UiProjector({ sessionId: target.sessionId });

  const onShutdown = () => ws.close(1001, "server shutting down");
  deps.closing.addEventListener("abort", onShutdown, { once: true });

  function send(frame: JsonObject): Promise<void> {
    if (ws.readyState !== ws.OPEN) return Promise.resolve();
    const text = JSON.stringify(frame);
    if (ws.bufferedAmount < highWaterMark) {
      ws.send(text);
      return Promise.resolve();
    }
    // The client reads slower than events come: wait until this one is written.
    return new Promise((resolve) => ws.send(text, () => resolve()));
  }

  function sendError(id: string | null, envelope: HarnErrorResponse, extra: JsonObject = {}) {
    return send({
      type: "error",
      id,
      status: envelope.status,
      ...extra,
      error: envelope.body.error as unknown as JsonObject,
    });
  }

  const heartbeat = setInterval(() => {
    if (!alive) {
      ws.terminate();
      return;
    }
    alive = false;
    ws.ping();
    void send({ type: "heartbeat", at: new Date().toISOString(), cursor: cursor || null });
  }, deps.config.TRELLIS_SSE_HEARTBEAT);
  heartbeat.unref();
  ws.on("pong", () => {
    alive = true;
  });

  ws.on("close", () => {
    clearInterval(heartbeat);
    deps.closing.removeEventListener("abort", onShutdown);
    abort.abort();
  });
  ws.on("error", () => ws.terminate());

  // Frames per second a client may send (per connection; commands also count
  // against the shared write limits). Past it a frame is refused, not read.
  let windowStart = 0;
  let framesInWindow = 0;

  ws.on("message", (data, isBinary) => {
    alive = true;
    const requestId = randomUUID();
    const now = Date.now();
    if (now - windowStart >= 1_000) {
      windowStart = now;
      framesInWindow = 0;
    }
    if (++framesInWindow > maxFramesPerSecond) {
      if (framesInWindow === maxFramesPerSecond + 1) {
        void sendError(
          null,
          harnError("rate_limited", `more than ${maxFramesPerSecond} frames per second`, {
            requestId,
            details: { scope: "connection", limit: maxFramesPerSecond, window_seconds: 1 },
          }),
          { retry_after: 1 },
        );
      }
      return;
    }
    let parsed: JsonValue | undefined;
    try {
      if (isBinary) throw invalid("frames must be text (JSON), not binary");
      parsed = parseJsonBody(toBuffer(data));
      const frame = parseClientFrame(parsed, {
        sessionId: target.sessionId,
        ...(target.taskId ? { taskId: target.taskId } : {}),
      });
      if (frame.kind === "ping") {
        void send({ type: "pong", id: frame.id, at: new Date().toISOString() });
        return;
      }
      queue = queue.then(() => runCommand(frame.command, requestId));
    } catch (error) {
      void sendError(frameIdOf(parsed), toHarnError(error, requestId));
    }
  });

  /** Run one command as its REST write would run, and reply. */
  async function runCommand(command: WsCommand, requestId: string): Promise<void> {
    if (ws.readyState !== ws.OPEN) return;
    const extra = { command: command.type };
    try {
      const auth = await deps.authenticator.authenticate(options.authorization);
      if (!auth.ok) {
        const code = auth.failure === "unavailable" ? "service_unavailable" : "unauthenticated";
        await sendError(
          command.id,
          harnError(code, authFailureMessage(auth.failure), { requestId }),
          extra,
        );
        if (code === "unauthenticated") ws.close(4401, "credential no longer valid");
        return;
      }
      caller = auth.caller;
      const decision = authorize(caller.scopes, restRuleOf("POST", command.path));
      if (!decision.allowed) {
        await sendError(
          command.id,
          harnError("permission_denied", decision.message, {
            requestId,
            details: { required_scope: decision.requiredScope ?? "" },
          }),
          extra,
        );
        return;
      }
      for (const [name, value] of Object.entries(command.params)) {
        if (controlChars.test(value)) throw invalid(`${name} contains a control character`, name);
      }
      const route = options.routes.get(command.path);
      if (route === undefined) throw new Error(`no REST route for ${command.path}`);
      const call: RestCall = {
        req: options.req,
        res: new ServerResponse(options.req),
        requestId,
        params: command.params,
        query: new URLSearchParams(),
        caller,
        body: command.body,
        idempotencyKey: "",
        options: (overrides = {}) => callOptions(caller, requestId, overrides.streaming ?? false),
        deps,
      };
      const guarded = deps.limits?.wrap(route) ?? route;
      const target = command.path.replace(/\{(\w+)\}/g, (_, n: string) =>
        encodeURIComponent(command.params[n] ?? ""),
      );
      const response =
        command.idempotencyKey === undefined
          ? await guarded.handle(call)
          : await runIdempotent(call, guarded, target, command.idempotencyKey);
      await reply(command, requestId, response);
    } catch (error) {
      const envelope = toHarnError(inputRejectedByDatabase(error) ?? error, requestId);
      if (envelope.status >= 500) {
        deps.logger.error("websocket command failed", {
          request_id: requestId,
          command: command.type,
          error,
        });
      }
      await sendError(command.id, envelope, extra);
    }
  }

  async function reply(command: WsCommand, requestId: string, response: RestResponse | undefined) {
    if (response === undefined) {
      await sendError(command.id, toHarnError(undefined, requestId), { command: command.type });
      return;
    }
    const text = typeof response.body === "string" ? response.body : "";
    let body: JsonValue = null;
    try {
      body = text === "" ? null : (JSON.parse(text) as JsonValue);
    } catch {
      body = null;
    }
    if (response.status >= 400) {
      const error =
        body !== null && typeof body === "object" && !Array.isArray(body) ? body.error : undefined;
      await send({
        type: "error",
        id: command.id,
        command: command.type,
        status: response.status,
        ...(response.headers["retry-after"]
          ? { retry_after: Number(response.headers["retry-after"]) }
          : {}),
        error: (error ?? null) as JsonValue,
      });
      return;
    }
    await send({
      type: "result",
      id: command.id,
      command: command.type,
      status: response.status,
      idempotent_replayed: response.headers["idempotent-replayed"] === "true",
      data: body,
    });
  }

  /** REST's idempotency rules for a command frame (same scope as the REST write). */
  async function runIdempotent(
    call: RestCall,
    route: RouteSpec,
    target: string,
    key: string,
  ): Promise<RestResponse | undefined> {
    const scope: IdempotencyScope = {
      actorId: call.caller.actorId,
      workspaceId: call.caller.workspaceId,
      method: "POST",
      target,
      key,
    };
    call.idempotencyKey = `idem_${scopeHash(scope)}`;
    const requestHash = sha256Hex(canonicalJson(call.body ?? {}));
    const config = deps.config;
    const deadline = Date.now() + config.TRELLIS_IDEMPOTENCY_WAIT;
    for (let delay = 20; ; delay = Math.min(delay * 2, 250)) {
      const claim = await deps.idempotency.claim(scope, requestHash, {
        leaseMs: config.TRELLIS_IDEMPOTENCY_LEASE,
        ttlMs: config.TRELLIS_IDEMPOTENCY_TTL,
      });
      if (claim.kind === "mismatch") {
        throw new TrellisError({
          reason: "idempotency_key_reused",
          message: "this idempotency_key was already used with a different command",
          param: "idempotency_key",
        });
      }
      if (claim.kind === "replay") {
        return {
          ...claim.response,
          headers: { ...claim.response.headers, "idempotent-replayed": "true" },
        };
      }
      if (claim.kind === "in_flight") {
        if (Date.now() + delay > deadline || abort.signal.aborted) {
          return errorResponse(
            harnError("conflict", "a command with this idempotency_key is still in progress", {
              requestId: call.requestId,
              param: "idempotency_key",
              headers: { "retry-after": "1" },
            }),
          );
        }
        await new Promise((resolve) => setTimeout(resolve, delay));
        continue;
      }
      let response: RestResponse;
      try {
        response =
          (await route.handle(call)) ?? errorResponse(toHarnError(undefined, call.requestId));
      } catch (error) {
        response = errorResponse(
          toHarnError(inputRejectedByDatabase(error) ?? error, call.requestId),
        );
      }
      try {
        if (isReplayable(response.status) && typeof response.body === "string") {
          await deps.idempotency.complete(
            claim.claim,
            {
              status: response.status,
              body: response.body,
              headers: { "content-type": response.headers["content-type"] ?? "application/json" },
            },
            config.TRELLIS_IDEMPOTENCY_TTL,
          );
        } else {
          await deps.idempotency.release(claim.claim);
        }
      } catch (error) {
        deps.logger.warn("could not record idempotent command", {
          request_id: call.requestId,
          error,
        });
      }
      return response;
    }
  }

  function callOptions(who: Caller, requestId: string, streaming: boolean): CallOptions {
    const headers = new Headers();
    setCallerHeaders(headers, who);
    headers.set(requestIdHeader, requestId);
    return {
      headers,
      timeoutMs: streaming ? 0 : deps.config.TRELLIS_UPSTREAM_TIMEOUT,
      signal: abort.signal,
    };
  }

  /** Frames for requests the event raises (input, authorization, tool approval). */
  async function sendEvent(event: Event, replayed: boolean): Promise<void> {
    cursor = event.id;
    await send({ type: "event", replayed, cursor: event.id, event: eventToHarn(event) });
    for (const envelope of projector.project(event)) {
      if (envelope.type !== "approval_required") continue;
      const p = envelope.payload;
      const type =
        p.kind === "auth"
          ? "authorization_request"
          : p.tool_call_id
            ? "approval_request"
            : "input_request";
      await send({
        type,
        replayed,
        cursor: event.id,
        request_id: p.request_id ?? null,
        task_id: p.task_id ?? null,
        reason: p.reason ?? "",
        tool_call_id: p.tool_call_id ?? null,
        tool_name: p.tool_name ?? null,
      });
    }
  }

  /** Replay history after the cursor, then follow the log live. */
  async function pump(): Promise<void> {
    const events = deps.clients.get(EventService);
    const scope = target.taskId
      ? { taskId: target.taskId, sessionId: "", workspaceId: "" }
      : { sessionId: target.sessionId, taskId: "", workspaceId: "" };
    await send({
      type: "ready",
      session_id: target.sessionId,
      task_id: target.taskId ?? null,
      resume_cursor: cursor || null,
      heartbeat_ms: deps.config.TRELLIS_SSE_HEARTBEAT,
    });
    let replayed = 0;
    for (;;) {
      const page = await events.listEvents(
        { ...scope, afterEventId: cursor, limit: 200 },
        callOptions(caller, randomUUID(), false),
      );
      for (const event of page.events) {
        if (abort.signal.aborted) return;
        await sendEvent(event, true);
        replayed++;
      }
      if (!page.hasMore || page.events.length === 0) break;
    }
    await send({ type: "replay_complete", cursor: cursor || null, replayed });
    const stream = events.streamEvents(
      { ...scope, afterEventId: cursor },
      callOptions(caller, randomUUID(), true),
    );
    for await (const { event } of stream) {
      if (event === undefined) continue;
      await sendEvent(event, false);
    }
  }

  pump().then(
    () => {
      if (ws.readyState === ws.OPEN) ws.close(1000, "stream ended");
    },
    async (error: unknown) => {
      if (abort.signal.aborted) return;
      const envelope = toHarnError(error, randomUUID());
      if (envelope.status >= 500) {
        deps.logger.warn("websocket event stream failed", { error, ...target });
      }
      await sendError(null, envelope);
      // A cursor the log cannot resume from, or a broken upstream: say so and end.
      ws.close(envelope.status >= 500 ? 1011 : 1008, envelope.body.error.code);
    },
  );
}

function invalid(message: string, param?: string): TrellisError {
  return new TrellisError({ reason: "invalid_request", message, ...(param ? { param } : {}) });
}

function toBuffer(data: Buffer | ArrayBuffer | Buffer[]): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return data;
}
