/**
 * One WebSocket session: server event frames from the session's (or task's)
 * event log, cursor resume, heartbeats, and client commands that run the same
 * code as the REST writes they stand for.
 *
 * Resume: the cursor (`?cursor=`, `?after_event_id=` or `Last-Event-ID` on the
 * upgrade request) is an event id. History after it is read in pages and sent
 * with `replayed: true`; a `replay_complete` frame follows; then the live
 * stream continues after the last event sent, so nothing is missed or sent
 * twice. Without a cursor the whole history is replayed first. Live events
 * come from the session's shared feed (`../feed/`): one upstream
 * subscription and one rendering per event for all sockets of a session.
 *
 * Heartbeats: every `TRELLIS_SSE_HEARTBEAT` the server sends a WebSocket ping
 * and a `heartbeat` frame (with the current cursor); a client from which
 * nothing (no pong, no frame) has arrived for `livenessTimeoutMs(heartbeat)`
 * — three heartbeats, at least 30 s, so a busy client is not cut off — is
 * disconnected.
 *
 * Slow clients: live events wait in a bounded queue (`defaultMaxQueued`,
 * `../feed/follow.ts`) while the socket is more than `highWaterMark` bytes
 * behind; past it the client gets an `error` frame (`service_unavailable`,
 * `details.metadata.reason = "slow_consumer"`) and close code 1013, and
 * reconnects with `?cursor=` its last event id.
 *
 * Commands run one at a time in arrival order. A bad frame gets an `error`
 * frame with the Harn error envelope and the connection stays open. The
 * credential is checked again before every command and at every heartbeat
 * (shared, cached checks: `../feed/credential-checks.ts`), so a revoked key
 * or an expired token stops an open socket too: an `error` frame
 * (`unauthenticated`) and close code 4401.
 */
import { randomUUID } from "node:crypto";
import { type IncomingMessage, ServerResponse } from "node:http";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Event } from "@trellis/contracts/core";
import type { Caller } from "@trellis/platform";
import { inputRejectedByDatabase, isTrellisError, TrellisError } from "@trellis/runtime";
import type { WebSocket } from "ws";
import { authFailureMessage } from "../auth/authenticator.js";
import { authorize } from "../auth/scope-table.js";
import { type HarnErrorResponse, harnError, toHarnError } from "../domain/errors.js";
import { eventToHarn } from "../domain/harn-json.js";
import { credentialChecksOf } from "../feed/credential-checks.js";
import { eventFeedsOf, type FeedItem } from "../feed/event-feeds.js";
import { followSession, stalledGraceMs } from "../feed/follow.js";
import { createRestCall, outgoingCallOptions } from "../http/call.js";
import type { GatewayDeps, RouteSpec } from "../http/context.js";
import { parseJsonBody, type RestResponse } from "../http/io.js";
import { type IdempotencyPorts, runIdempotent } from "../http/pipeline/idempotency.js";
import { routePortsOf } from "../http/ports.js";
import { restRuleOf } from "../http/routes/rules.js";
import type { ProjectedEnvelope } from "../ui/projection/index.js";
import { UiProjector } from "../ui/projection/projector.js";
import { frameIdOf, parseClientFrame, type WsCommand } from "./frames.js";

/** What a connection streams and acts on. */
export interface WsTarget {
  /** The session's workspace (session ids are unique per workspace). */
  workspaceId: string;
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
  let lastHeard = Date.now();
  const liveness = livenessTimeoutMs(deps.config.TRELLIS_SSE_HEARTBEAT);
  let queue: Promise<void> = Promise.resolve();
  const checks = credentialChecksOf(deps.authenticator, deps.config.TRELLIS_SSE_HEARTBEAT);
  // A command waiting for an earlier one with its key stops when the socket or the gateway does.
  const idempotency: IdempotencyPorts = {
    idempotency: deps.idempotency,
    config: deps.config,
    logger: deps.logger,
    closing: AbortSignal.any([deps.closing, abort.signal]),
  };

  const onShutdown = () => ws.close(1001, "server shutting down");
  deps.closing.addEventListener("abort", onShutdown, { once: true });

  function send(frame: JsonObject): Promise<void> {
    return sendText(JSON.stringify(frame));
  }

  function sendText(text: string): Promise<void> {
    if (ws.readyState !== ws.OPEN) return Promise.resolve();
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
    if (Date.now() - lastHeard > liveness) {
      ws.terminate();
      return;
    }
    ws.ping();
    void send({ type: "heartbeat", at: new Date().toISOString(), cursor: cursor || null });
    // A revoked key or an expired token also ends the event stream (close 4401).
    void checks.refusal(options.authorization).then((failure) => {
      if (failure === undefined || ws.readyState !== ws.OPEN) return;
      // The error frame is queued before the close frame; closing ends the stream.
      void sendError(
        null,
        harnError("unauthenticated", authFailureMessage(failure), { requestId: randomUUID() }),
      );
      ws.close(4401, "credential no longer valid");
    });
  }, deps.config.TRELLIS_SSE_HEARTBEAT);
  heartbeat.unref();
  ws.on("pong", () => {
    lastHeard = Date.now();
  });

  // Set when the client fell too far behind (see ../feed/follow.ts).
  let stalled: NodeJS.Timeout | undefined;
  ws.on("close", () => {
    clearInterval(heartbeat);
    clearTimeout(stalled);
    deps.closing.removeEventListener("abort", onShutdown);
    abort.abort();
  });
  ws.on("error", () => ws.terminate());

  // Frames per second a client may send (per connection; commands also count
  // against the shared write limits). Past it a frame is refused, not read.
  let windowStart = 0;
  let framesInWindow = 0;

  ws.on("message", (data, isBinary) => {
    lastHeard = Date.now();
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
      const call = createRestCall({
        req: options.req,
        res: new ServerResponse(options.req),
        requestId,
        params: command.params,
        caller,
        body: command.body,
        ports: routePortsOf(deps),
        signal: abort.signal,
      });
      const guarded = deps.limits?.wrap(route) ?? route;
      const target = command.path.replace(/\{(\w+)\}/g, (_, n: string) =>
        encodeURIComponent(command.params[n] ?? ""),
      );
      const { idempotencyKey } = command;
      const response =
        idempotencyKey === undefined
          ? await guarded.handle(call)
          : await runIdempotent(
              idempotency,
              { call, method: "POST", target, key: idempotencyKey, param: "idempotency_key" },
              () => guarded.handle(call),
            );
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

  /** A history event and the request frames it raises (marked replayed). */
  async function sendReplayed(event: Event, projector: UiProjector): Promise<void> {
    cursor = event.id;
    for (const frame of eventFrames(event, eventToHarn(event), projector.project(event), true)) {
      await send(frame);
    }
  }

  /** Replay history after the cursor, then follow the session's shared feed. */
  async function pump(): Promise<void> {
    await send({
      type: "ready",
      session_id: target.sessionId,
      task_id: target.taskId ?? null,
      resume_cursor: cursor || null,
      heartbeat_ms: deps.config.TRELLIS_SSE_HEARTBEAT,
    });
    // Only the replay needs a projector of its own (live frames come projected by the feed).
    let projector: UiProjector | undefined = new UiProjector({ sessionId: target.sessionId });
    await followSession({
      feeds: eventFeedsOf(deps.clients),
      clients: deps.clients,
      workspaceId: target.workspaceId,
      sessionId: target.sessionId,
      ...(target.taskId ? { taskId: target.taskId } : {}),
      cursor,
      callOptions: (streaming) =>
        outgoingCallOptions(
          {
            caller,
            requestId: randomUUID(),
            upstreamTimeoutMs: deps.config.TRELLIS_UPSTREAM_TIMEOUT,
            signal: abort.signal,
          },
          streaming,
        ),
      signal: abort.signal,
      onOverflow: () => {
        stalled ??= setTimeout(() => ws.terminate(), stalledGraceMs);
        stalled.unref();
      },
      sink: {
        replay: async (event) => {
          if (projector) await sendReplayed(event, projector);
          return false;
        },
        replayed: async (count) => {
          projector = undefined;
          await send({ type: "replay_complete", cursor: cursor || null, replayed: count });
        },
        live: async (item) => {
          cursor = item.event.id;
          for (const text of item.rendered(liveFramesOf)) await sendText(text);
          return false;
        },
      },
    });
  }

  pump().then(
    () => {
      if (ws.readyState === ws.OPEN) ws.close(1000, "stream ended");
    },
    async (error: unknown) => {
      if (abort.signal.aborted) return;
      const envelope = toHarnError(error, randomUUID());
      const slow = isTrellisError(error) && error.metadata.reason === "slow_consumer";
      if (envelope.status >= 500 && !slow) {
        deps.logger.warn("websocket event stream failed", { error, ...target });
      }
      await sendError(null, envelope);
      // Too slow: come back with the cursor. A cursor the log cannot resume
      // from, or a broken upstream: say so and end.
      if (slow) ws.close(1013, "slow consumer; reconnect with the cursor");
      else ws.close(envelope.status >= 500 ? 1011 : 1008, envelope.body.error.code);
    },
  );
}

/** The frames of one event: the event, then the requests it raises (input, authorization, tool approval). */
function eventFrames(
  event: Event,
  harn: JsonObject,
  envelopes: readonly ProjectedEnvelope[],
  replayed: boolean,
): JsonObject[] {
  const frames: JsonObject[] = [{ type: "event", replayed, cursor: event.id, event: harn }];
  for (const envelope of envelopes) {
    if (envelope.type !== "approval_required") continue;
    const p = envelope.payload;
    const type =
      p.kind === "auth"
        ? "authorization_request"
        : p.tool_call_id
          ? "approval_request"
          : "input_request";
    frames.push({
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
  return frames;
}

/** A live feed item's frames as text (rendered once per event, shared by every socket). */
function liveFramesOf(item: FeedItem): string[] {
  return eventFrames(item.event, item.harn, item.envelopes, false).map((f) => JSON.stringify(f));
}

/** How long a socket may stay silent (no pong, no frame) before it is dropped. */
export function livenessTimeoutMs(heartbeatMs: number): number {
  return Math.max(3 * heartbeatMs, 30_000);
}

function invalid(message: string, param?: string): TrellisError {
  return new TrellisError({ reason: "invalid_request", message, ...(param ? { param } : {}) });
}

function toBuffer(data: Buffer | ArrayBuffer | Buffer[]): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return data;
}
