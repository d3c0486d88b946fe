/**
 * The WebSocket upgrade of the gateway's HTTP/1.1 listener.
 *
 * Paths: `/v1/sessions/{session_id}/ws` (the session's interactive channel),
 * and upgrades of the SSE paths `/v1/sessions/{session_id}/events/stream` and
 * `/v1/tasks/{task_id}/stream` (the OpenAPI document's `x-websocket-path`).
 *
 * Credentials: `Authorization: Bearer …`, or (browsers, which cannot set
 * headers on a WebSocket) the subprotocols `harn.v1, bearer.<credential>`
 * with `?protocol_version=` for the version header. The upgrade request is
 * checked like a REST request before the handshake completes, answering refusals with the same status and error envelope:
 * protocol version (426), bearer credential (401), the path's rule in
 * `auth/scope-table.ts` (403), an Origin that CORS does not allow (403), and
 * the session or task being visible to the caller (404).
 */
import { randomUUID } from "node:crypto";
import { type IncomingMessage, ServerResponse, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import type { UpgradeHandler } from "@trellis/runtime";
import { WebSocketServer } from "ws";
import { authRefusal } from "../auth/authenticator.js";
import { sourceOf } from "../auth/client-source.js";
import { authorize } from "../auth/scope-table.js";
import { type HarnErrorResponse, harnError, toHarnError } from "../domain/errors.js";
import {
  checkProtocolVersion,
  protocolVersionHeader,
  supportedProtocolVersions,
} from "../domain/protocol.js";
import { createRestCall } from "../http/call.js";
import type { GatewayDeps, RouteSpec } from "../http/context.js";
import { loadCorsPolicy } from "../http/cors.js";
import { routePortsOf } from "../http/ports.js";
import { Router } from "../http/router.js";
import { visibleSession, visibleTask } from "../http/routes/common.js";
import { restRoutes } from "../http/routes/index.js";
import { restRuleOf } from "../http/routes/rules.js";
import { serveWebSocket, type WsTarget } from "./connection.js";

interface UpgradePath {
  method: "GET";
  path: string;
}

const upgradePaths: UpgradePath[] = [
  { method: "GET", path: "/v1/sessions/{session_id}/ws" },
  { method: "GET", path: "/v1/sessions/{session_id}/events/stream" },
  { method: "GET", path: "/v1/tasks/{task_id}/stream" },
];

/** Largest client frame accepted (bytes); larger ones close the socket with 1009. */
export const maxFrameBytes = 1 << 20;

/** A running WebSocket endpoint. */
export interface WebSocketEndpoint {
  upgrade: UpgradeHandler;
  /** Open connections (for tests and metrics). */
  readonly connections: number;
  close(): void;
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The subprotocol the server speaks (named in the handshake when the client offers it). */
export const subprotocol = "harn.v1";

/**
 * A browser cannot set `Authorization` on a WebSocket: it may offer the
 * credential as a subprotocol `bearer.<credential>` instead (with `harn.v1`,
 * which the server selects, so the credential is never echoed).
 */
function subprotocolBearer(req: IncomingMessage): string | undefined {
  const offered = header(req, "sec-websocket-protocol");
  if (offered === undefined) return undefined;
  for (const entry of offered.split(",")) {
    const value = entry.trim();
    if (value.startsWith("bearer.") && value.length > "bearer.".length) {
      return `Bearer ${value.slice("bearer.".length)}`;
    }
  }
  return undefined;
}

/** Answer an upgrade request with an HTTP error response and close the socket. */
function refuse(socket: Duplex, envelope: HarnErrorResponse, requestId: string): void {
  const body = JSON.stringify(envelope.body);
  const lines = [
    `HTTP/1.1 ${envelope.status} ${STATUS_CODES[envelope.status] ?? "Error"}`,
    "content-type: application/json; charset=utf-8",
    `content-length: ${Buffer.byteLength(body)}`,
    `x-request-id: ${requestId}`,
    "connection: close",
    ...Object.entries(envelope.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
  ];
  if (socket.writable) socket.end(`${lines.join("\r\n")}\r\n\r\n${body}`);
  else socket.destroy();
}

/** Build the gateway's WebSocket endpoint. */
export function createWebSocketEndpoint(deps: GatewayDeps): WebSocketEndpoint {
  const router = new Router(upgradePaths);
  const cors = loadCorsPolicy(deps.env);
  const postRoutes = new Map<string, RouteSpec>(
    restRoutes.filter((r) => r.method === "POST").map((r) => [r.path, r]),
  );
  const wss = new WebSocketServer({
    noServer: true,
    // Browsers offer `harn.v1` next to `bearer.<credential>`; the answer names `harn.v1`.
    handleProtocols: (protocols) => (protocols.has(subprotocol) ? subprotocol : false),
    maxPayload: Math.min(maxFrameBytes, deps.config.TRELLIS_MAX_BODY_BYTES),
    perMessageDeflate: false,
  });

  async function accept(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    const requestId = header(req, "x-request-id")?.slice(0, 128) || randomUUID();
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://gateway.invalid");
    } catch {
      return refuse(
        socket,
        harnError("invalid_request", "bad request target", { requestId }),
        requestId,
      );
    }
    const match = router.match(req.method ?? "GET", url.pathname.replace(/\/+$/, ""));
    if (match.kind !== "found" || (header(req, "upgrade") ?? "").toLowerCase() !== "websocket") {
      return refuse(
        socket,
        harnError("resource_not_found", `no WebSocket endpoint at ${url.pathname.slice(0, 200)}`, {
          requestId,
        }),
        requestId,
      );
    }
    const origin = header(req, "origin");
    if (origin !== undefined && cors.allowOrigin(origin) === undefined) {
      return refuse(
        socket,
        harnError("permission_denied", "this origin may not open WebSockets to this API", {
          requestId,
          param: "Origin",
        }),
        requestId,
      );
    }
    const version = checkProtocolVersion(
      req.headers[protocolVersionHeader] ?? url.searchParams.get("protocol_version") ?? undefined,
    );
    if (!version.ok) {
      return refuse(
        socket,
        harnError(
          "unsupported_protocol_version",
          `a supported Harn-Agents-Protocol-Version is required; supported: ${supportedProtocolVersions.join(", ")}`,
          {
            requestId,
            param: "Harn-Agents-Protocol-Version",
            details: { supported_versions: [...supportedProtocolVersions] },
          },
        ),
        requestId,
      );
    }
    const authorization = header(req, "authorization") ?? subprotocolBearer(req);
    const auth = await deps.authenticator.authenticate(authorization, sourceOf(deps, req));
    if (!auth.ok) {
      return refuse(
        socket,
        authRefusal(auth.failure, requestId, auth.retryAfterSeconds),
        requestId,
      );
    }
    const caller = auth.caller;
    const decision = authorize(caller.scopes, restRuleOf("GET", match.route.path));
    if (!decision.allowed) {
      return refuse(
        socket,
        harnError("permission_denied", decision.message, {
          requestId,
          details: { required_scope: decision.requiredScope ?? "" },
        }),
        requestId,
      );
    }
    // The session or task must be visible to the caller (404 otherwise).
    const probe = createRestCall({
      req,
      res: new ServerResponse(req),
      requestId,
      params: match.params,
      query: url.searchParams,
      caller,
      ports: routePortsOf(deps),
    });
    let target: WsTarget;
    try {
      const taskId = match.params.task_id;
      if (taskId !== undefined) {
        const task = await visibleTask(probe, taskId);
        target = { workspaceId: task.workspaceId, sessionId: task.sessionId, taskId: task.id };
      } else {
        const session = await visibleSession(probe, match.params.session_id ?? "");
        target = { workspaceId: session.workspaceId, sessionId: session.id };
      }
    } catch (error) {
      const envelope = toHarnError(error, requestId);
      if (envelope.status >= 500) {
        deps.logger.warn("websocket upgrade failed", { request_id: requestId, error });
      }
      return refuse(socket, envelope, requestId);
    }
    const cursor =
      header(req, "last-event-id")?.trim() ||
      url.searchParams.get("cursor")?.trim() ||
      url.searchParams.get("after_event_id")?.trim() ||
      "";
    // biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
    if (/[\u0000-\u001f\u007f]/.test(cursor) || cursor.length > 512) {
      return refuse(
        socket,
        harnError("invalid_request", "the cursor is not an event id", {
          requestId,
          param: "cursor",
        }),
        requestId,
      );
    }
    if (deps.closing.aborted) {
      return refuse(
        socket,
        harnError("service_unavailable", "the server is shutting down", { requestId }),
        requestId,
      );
    }
    wss.handleUpgrade(req, socket, head, (ws) => {
      serveWebSocket({
        ws,
        req,
        deps,
        caller,
        authorization,
        target,
        cursor,
        routes: postRoutes,
      });
    });
  }

  return {
    upgrade(req, socket, head) {
      socket.on("error", () => socket.destroy());
      accept(req, socket, head).catch((error: unknown) => {
        deps.logger.error("websocket upgrade failed", { error });
        socket.destroy();
      });
    },
    get connections() {
      return wss.clients.size;
    },
    close() {
      for (const client of wss.clients) client.close(1001, "server shutting down");
      wss.close();
    },
  };
}
