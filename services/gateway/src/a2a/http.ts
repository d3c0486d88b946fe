/**
 * A2A on the gateway's port (the JSON-RPC binding of `@a2a-js/sdk`, mounted
 * on the plain Node HTTP server without express):
 *
 * - `GET /.well-known/agent-card.json`: the card of the default workspace's
 *   default agent;
 * - `GET /a2a/{agent_id}/.well-known/agent-card.json`: an agent's card;
 * - `POST /a2a/{agent_id}`: JSON-RPC (SendMessage, SendStreamingMessage,
 *   GetTask, CancelTask, SubscribeToTask), streams as SSE.
 *
 * Cards of the default workspace's agents are public (discovery: a client
 * reads one to learn how to authenticate); another workspace's cards answer
 * only a credential of that workspace (else 404). JSON-RPC needs a bearer credential (API key or OAuth2
 * token); refusals before the call are HTTP: 401 without a valid one, 404
 * for an agent outside the credential's workspace, 403 for an agent the
 * credential is restricted from or a method its scopes do not grant. Inside
 * a call, another workspace's task is `TaskNotFound`.
 */
import { randomUUID } from "node:crypto";
import {
  A2A_VERSION_HEADER,
  type AgentCard,
  Extensions,
  formatSSEErrorEvent,
  formatSSEEvent,
  HTTP_EXTENSION_HEADER,
  SSE_HEADERS,
} from "@a2a-js/sdk";
import { JsonRpcTransportHandler, ServerCallContext, validateVersion } from "@a2a-js/sdk/server";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Agent, AgentService } from "@trellis/contracts/tasks";
import type { Caller } from "@trellis/platform";
import {
  fieldCapsFromEnv,
  type HttpHandler,
  type HttpRequest,
  type HttpResponse,
  isTrellisError,
  jsonDepthFor,
  requestIdHeader,
  requestLimitsFromEnv,
  structureLimitsFromEnv,
  TrellisError,
} from "@trellis/runtime";
import { authRefusal } from "../auth/authenticator.js";
import { sourceOf } from "../auth/client-source.js";
import { authorize } from "../auth/scope-table.js";
import { harnError, toHarnError } from "../domain/errors.js";
import { isAdmin } from "../domain/scopes.js";
import { anonymousCaller, outgoingCallOptions } from "../http/call.js";
import type { GatewayDeps, RouteSpec } from "../http/context.js";
import { errorResponse, parseJsonBody, readBody, send } from "../http/io.js";
import { routePortsOf } from "../http/ports.js";
import { ensureVisible } from "../http/routes/common.js";
import { publicBaseUrl } from "../http/routes/discovery.js";
import { restRoutes } from "../http/routes/index.js";
import { restRuleOf } from "../http/routes/rules.js";
import { ensureAgentAllowed } from "../policy/agent-policy.js";
import { agentCardJson, agentCardOf, defaultAgentId } from "./card.js";
import { TrellisA2aHandler } from "./request-handler.js";

const cardPath = "/.well-known/agent-card.json";
const agentPath = /^\/a2a\/([A-Za-z0-9_.:-]{1,200})(\/\.well-known\/agent-card\.json|\/)?$/;

/**
 * The REST rules an A2A method needs (every one of them): a streaming send
 * also reads the task's events; a send that starts a context also needs
 * `sessions:write`, checked when it does.
 */
const methodRules: Readonly<Record<string, readonly (readonly [string, string])[]>> = {
  SendMessage: [["POST", "/v1/sessions/{session_id}/tasks"]],
  SendStreamingMessage: [
    ["POST", "/v1/sessions/{session_id}/tasks"],
    ["GET", "/v1/tasks/{task_id}/stream"],
  ],
  GetTask: [["GET", "/v1/tasks/{task_id}"]],
  CancelTask: [["POST", "/v1/tasks/{task_id}/cancel"]],
  SubscribeToTask: [["GET", "/v1/tasks/{task_id}/stream"]],
  ListTasks: [["GET", "/v1/tasks"]],
};

const readMethods = new Set(["GetTask", "SubscribeToTask", "ListTasks"]);

/** The gateway's A2A handler (false for paths that are not A2A's). */
export function createA2aHandler(deps: GatewayDeps): HttpHandler {
  const transport = (handler: TrellisA2aHandler) => new JsonRpcTransportHandler(handler);
  const routes = new Map<string, RouteSpec>(restRoutes.map((r) => [`${r.method} ${r.path}`, r]));
  // The REST body limits (keys, values, depth) and the RPC id cap, on every JSON-RPC body.
  const structure = structureLimitsFromEnv(deps.env, jsonDepthFor(requestLimitsFromEnv(deps.env)));
  const maxIdLength = fieldCapsFromEnv(deps.env).maxIdLength;

  return async (req, res) => {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    let agentId: string;
    let card: boolean;
    if (path === cardPath) {
      agentId = defaultAgentId;
      card = true;
    } else {
      const match = agentPath.exec(path);
      if (match === null) {
        if (path === "/a2a" || path.startsWith("/a2a/")) {
          sendError(
            res,
            harnError("resource_not_found", `no such endpoint: ${path}`, {
              requestId: randomUUID(),
            }),
          );
          return true;
        }
        return false;
      }
      agentId = match[1] as string;
      card = match[2] === `/${cardPath.slice(1)}`;
    }
    const requestId = randomUUID();
    res.setHeader(requestIdHeader, requestId);
    try {
      if (card) {
        if (req.method !== "GET" && req.method !== "HEAD")
          return methodNotAllowed(res, "GET", requestId);
        await serveCard(req, res, agentId, requestId);
      } else {
        if (req.method !== "POST") return methodNotAllowed(res, "POST", requestId);
        await serveRpc(req, res, agentId, requestId);
      }
    } catch (error) {
      if (!res.headersSent) sendError(res, toHarnError(error, requestId));
      else if (!res.writableEnded) res.end();
      if (!isTrellisError(error))
        deps.logger.error("a2a request failed", { request_id: requestId, error });
    }
    return true;
  };

  function methodNotAllowed(res: HttpResponse, allow: string, requestId: string): true {
    const error = harnError("invalid_request", `only ${allow} is allowed here`, {
      requestId,
      headers: { allow },
    });
    sendError(res, { ...error, status: 405 });
    return true;
  }

  function baseOf(req: HttpRequest): string {
    return publicBaseUrl({ req, ports: routePortsOf(deps) });
  }

  /** The agent, read as the caller (or internally, for a public card). */
  async function agentOf(
    agentId: string,
    requestId: string,
    caller?: Caller,
  ): Promise<Agent | undefined> {
    const options = outgoingCallOptions({
      caller: caller ?? anonymousCaller,
      requestId,
      upstreamTimeoutMs: deps.config.TRELLIS_UPSTREAM_TIMEOUT,
    });
    const { agent } = await deps.clients.get(AgentService).getAgent({ agentId }, options);
    return agent;
  }

  /**
   * Cards of the default workspace's agents (and shared ones) are public;
   * another workspace's cards only to a credential of that workspace, so an
   * anonymous caller learns nothing about other tenants' agents.
   */
  async function cardVisible(req: HttpRequest, agent: Agent): Promise<boolean> {
    if (agent.workspaceId === "" || agent.workspaceId === deps.config.TRELLIS_DEFAULT_WORKSPACE) {
      return true;
    }
    const header = req.headers.authorization;
    // With its source: failed guesses here count against the throttle as on REST.
    const auth = await deps.authenticator.authenticate(
      Array.isArray(header) ? header[0] : header,
      sourceOf(deps, req),
    );
    return (
      auth.ok && (auth.caller.workspaceId === agent.workspaceId || isAdmin(auth.caller.scopes))
    );
  }

  async function serveCard(
    req: HttpRequest,
    res: HttpResponse,
    agentId: string,
    requestId: string,
  ) {
    const agent = await agentOf(agentId, requestId).catch(absentOnNotFound);
    if (agent === undefined || !(await cardVisible(req, agent))) {
      sendError(
        res,
        harnError("resource_not_found", `no agent ${JSON.stringify(agentId)}`, { requestId }),
      );
      return;
    }
    const body = JSON.stringify(agentCardJson(agentCardOf(agent, baseOf(req))));
    send(res, {
      status: 200,
      body,
      headers: { "content-type": "application/json", "cache-control": "public, max-age=60" },
    });
  }

  async function serveRpc(req: HttpRequest, res: HttpResponse, agentId: string, requestId: string) {
    const header = req.headers.authorization;
    // With its source: failed guesses here count against the throttle as on REST.
    const auth = await deps.authenticator.authenticate(
      Array.isArray(header) ? header[0] : header,
      sourceOf(deps, req),
    );
    if (!auth.ok) {
      sendError(res, authRefusal(auth.failure, requestId, auth.retryAfterSeconds));
      return;
    }
    const caller = auth.caller;
    // A restricted credential learns nothing about agents it may not use.
    ensureAgentAllowed(caller, agentId);
    const agent = await agentOf(agentId, requestId, caller).catch(absentOnNotFound);
    if (agent === undefined) {
      sendError(
        res,
        harnError("resource_not_found", `no agent ${JSON.stringify(agentId)}`, { requestId }),
      );
      return;
    }
    ensureVisible({ caller }, agent.workspaceId, "agent", agentId);
    const raw = await readBody(req, deps.config.TRELLIS_MAX_BODY_BYTES);
    let body: unknown;
    try {
      body = parseJsonBody(raw, structure);
    } catch (error) {
      // Past a structure limit: refused here (400 naming the field), never
      // handed to the SDK to parse and convert.
      if (isStructureRefusal(error)) throw error;
      if (error instanceof TrellisError && error.message.includes("NUL")) {
        // Valid JSON holding U+0000: name where it is when it is in params.
        const parsed = JSON.parse(raw.toString("utf8")) as { params?: unknown } | null;
        checkParams(parsed?.params, "params", maxIdLength);
        throw error;
      }
      body = raw.toString("utf8"); // the SDK answers a JSON-RPC parse error
    }
    if (body !== null && typeof body === "object" && !Array.isArray(body)) {
      checkParams((body as JsonObject).params, "params", maxIdLength);
    }
    const method =
      body !== null && typeof body === "object" && !Array.isArray(body)
        ? (body as JsonObject).method
        : undefined;
    for (const [m, p] of typeof method === "string" ? (methodRules[method] ?? []) : []) {
      const decision = authorize(caller.scopes, restRuleOf(m, p));
      if (!decision.allowed) {
        sendError(
          res,
          harnError("permission_denied", decision.message, {
            requestId,
            details: { required_scope: decision.requiredScope ?? "" },
          }),
        );
        return;
      }
    }

    // Reads count against the caller's read rate here; writes count in the
    // REST routes they run (task quota, write rates).
    if (typeof method === "string" && readMethods.has(method) && deps.limits) {
      const admission = await deps.limits.admit(
        caller,
        requestId,
        { kind: "read" },
        async () => "",
      );
      if (!admission.ok) {
        sendError(res, admission.refusal);
        return;
      }
      await admission.settle(true);
    }

    const client = new AbortController();
    const gone = () => client.abort();
    res.once("close", gone);
    const signal = AbortSignal.any([client.signal, deps.closing]);
    const card: AgentCard = agentCardOf(agent, baseOf(req));
    const handler = new TrellisA2aHandler({
      deps,
      caller,
      agent,
      card,
      req,
      res,
      requestId,
      signal,
      routes,
    });
    const versionHeader = req.headers[A2A_VERSION_HEADER.toLowerCase()];
    const requestedVersion = Array.isArray(versionHeader) ? versionHeader[0] : versionHeader;
    const extensionsHeader = req.headers[HTTP_EXTENSION_HEADER.toLowerCase()];
    const context = new ServerCallContext({
      requestedExtensions: Extensions.parseServiceParameter(
        Array.isArray(extensionsHeader) ? extensionsHeader.join(",") : extensionsHeader,
      ),
      ...(requestedVersion ? { requestedVersion } : {}),
    });
    const id = body !== null && typeof body === "object" ? ((body as JsonObject).id ?? null) : null;
    try {
      validateVersion(context.requestedVersion, card, "JSONRPC");
    } catch (error) {
      sendJson(res, 200, rpcErrorOf(id, error));
      return;
    }
    try {
      const result = await transport(handler).handle(
        body as Record<string, unknown> | string,
        context,
      );
      if (!isAsyncIterable(result)) {
        sendJson(res, 200, result);
        return;
      }
      const iterator = result[Symbol.asyncIterator]();
      let first: IteratorResult<unknown>;
      try {
        first = await iterator.next();
      } catch (error) {
        sendJson(res, 200, rpcErrorOf(id, error));
        return;
      }
      res.statusCode = 200;
      for (const [name, value] of Object.entries(SSE_HEADERS)) res.setHeader(name, value);
      const out = res as { write(chunk: string): boolean; flushHeaders?(): void };
      out.flushHeaders?.();
      try {
        if (!first.done) out.write(formatSSEEvent(first.value));
        for (;;) {
          const next = await iterator.next();
          if (next.done || signal.aborted) break;
          out.write(formatSSEEvent(next.value));
        }
      } catch (error) {
        if (!signal.aborted) {
          out.write(formatSSEErrorEvent(rpcErrorOf(id, error)));
        }
      } finally {
        await iterator.return?.(undefined);
        if (!res.writableEnded) res.end();
      }
    } finally {
      res.off("close", gone);
    }
  }
}

/** A missing agent is absent (404); an unavailable tasks service stays an error (503). */
function absentOnNotFound(error: unknown): undefined {
  if (ConnectError.from(error).code === Code.NotFound) return undefined;
  if (isTrellisError(error) && error.reason === "resource_not_found") return undefined;
  throw error;
}

/** The JSON-RPC error response to request `id` for a failure, whether sent as JSON or as an SSE event. */
function rpcErrorOf(id: JsonValue, error: unknown) {
  return { jsonrpc: "2.0", id, error: JsonRpcTransportHandler.mapToJSONRPCError(error) } as const;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return value !== null && typeof value === "object" && Symbol.asyncIterator in value;
}

function sendJson(res: HttpResponse, status: number, body: unknown): void {
  send(res, {
    status,
    body: JSON.stringify(body),
    headers: { "content-type": "application/json" },
  });
}

function sendError(res: HttpResponse, error: Parameters<typeof errorResponse>[0]): void {
  send(res, errorResponse(error));
}

function isStructureRefusal(error: unknown): boolean {
  return (
    error instanceof TrellisError &&
    Object.keys(error.metadata).some((key) => key.startsWith("limit_"))
  );
}

/** An id-like member: `id`, `messageId`, `referenceTaskIds`, `task_id`… */
function isIdKey(key: string): boolean {
  return key === "id" || /(?:Id|Ids|_id|_ids)$/.test(key);
}

/**
 * Refuse a JSON-RPC `params` holding a string with U+0000 anywhere (no
 * store keeps one) or an id-like member longer than `maxIdLength` (what the
 * RPC field caps allow), as `invalid_request` naming the member. Iterative;
 * the structure limits already bound its size.
 */
function checkParams(params: unknown, root: string, maxIdLength: number): void {
  const stack: { value: unknown; path: string; id: boolean }[] = [
    { value: params, path: root, id: false },
  ];
  while (stack.length > 0) {
    const { value, path, id } = stack.pop() as { value: unknown; path: string; id: boolean };
    if (typeof value === "string") {
      if (value.includes("\u0000")) {
        throw new TrellisError({
          reason: "invalid_request",
          message: `${path} contains a NUL character (U+0000), which no field may hold`,
          param: path,
        });
      }
      if (id && value.length > maxIdLength) {
        throw new TrellisError({
          reason: "invalid_request",
          message: `${path} is longer than ${maxIdLength} characters`,
          param: path,
          metadata: { limit_id_length: String(maxIdLength) },
        });
      }
    } else if (Array.isArray(value)) {
      value.forEach((item, i) => {
        stack.push({ value: item, path: `${path}[${i}]`, id });
      });
    } else if (value !== null && typeof value === "object") {
      for (const [key, member] of Object.entries(value)) {
        const safe = /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? key : JSON.stringify(key.slice(0, 64));
        stack.push({ value: member, path: `${path}.${safe}`, id: isIdKey(key) });
      }
    }
  }
}
