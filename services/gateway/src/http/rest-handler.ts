/**
 * The REST + SSE surface, as the server's plain-HTTP handler.
 *
 * Order of checks for a request under `/v1`:
 *   1. route: unknown path → 404, known path with another method → 405;
 *      a protocol operation no route serves reaches a route answering 501
 *      `not_implemented` once authenticated (`harn-surface.ts`);
 *   2. protocol version (every route but discovery) → 426 when missing or
 *      unsupported. It comes before authentication: the version decides how
 *      everything else in the request is read, the supported versions are
 *      public (discovery), and a client on the wrong version learns that
 *      first instead of debugging its key;
 *   3. authentication → 401, then the route's rule (its `scope`) → 403;
 *   4. body (writes) → 413 / 400;
 *   5. idempotency (writes with `Idempotency-Key`) → replay / 409;
 *   6. the route.
 * Every response carries `x-request-id` (set by the runtime) and every error
 * the Harn envelope with the same id in `request_id`.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import { context as otelContext, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { type Caller, serviceUrl, setCallerHeaders } from "@trellis/platform";
import {
  canonicalJson,
  extractTraceContext,
  type HttpHandler,
  type HttpRequest,
  type HttpResponse,
  httpRequestId,
  inputRejectedByDatabase,
  jsonDepthFor,
  type LogFields,
  requestIdHeader,
  requestLimitsFromEnv,
  sleep,
  structureLimitsFromEnv,
  TrellisError,
} from "@trellis/runtime";
import { authRefusal } from "../auth/authenticator.js";
import { authorize } from "../auth/scope-table.js";
import { sha256Hex } from "../domain/canonical-json.js";
import { type HarnErrorResponse, harnError, toHarnError } from "../domain/errors.js";
import {
  checkProtocolVersion,
  currentProtocolVersion,
  protocolVersionHeader,
  supportedProtocolVersions,
} from "../domain/protocol.js";
import { type IdempotencyScope, scopeHash } from "../store/idempotency-store.js";
import { clientWentAway } from "./client-abort.js";
import type { GatewayDeps, RestCall, RouteSpec } from "./context.js";
import { corsHeaders, loadCorsPolicy, preflightHeaders } from "./cors.js";
import { notServedRoutes } from "./harn-surface.js";
import { errorResponse, type RestResponse, readJsonBody, send } from "./io.js";
import { forwardHttp, stampCaller } from "./proxy.js";
import { Router } from "./router.js";
import { restRoutes } from "./routes/index.js";

const anonymous: Caller = { actorId: "", workspaceId: "", scopes: [] };
// Marks a request handed on to another module's HTTP handler (embedded mode).
const handOn = Symbol("hand on");
const tracer = trace.getTracer("@trellis/gateway");
const idempotencyKeyHeader = "idempotency-key";

/**
 * Path parameters and query values are text that ends up in lookups: refuse
 * NUL and other control characters (no id or cursor has them, and PostgreSQL
 * cannot even compare a NUL) with 400 naming the parameter.
 */
function checkTextInputs(params: Readonly<Record<string, string>>, query: URLSearchParams): void {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point
  const control = /[\u0000-\u001f\u007f]/;
  for (const [name, value] of Object.entries(params)) {
    if (control.test(value)) {
      throw new TrellisError({
        reason: "invalid_request",
        message: `path parameter ${name} contains a control character`,
        param: name,
      });
    }
  }
  for (const [name, value] of query) {
    if (control.test(value) || control.test(name)) {
      throw new TrellisError({
        reason: "invalid_request",
        message: `query parameter ${JSON.stringify(name.slice(0, 64))} contains a control character`,
        param: name.slice(0, 64),
      });
    }
  }
}

/** Statuses whose response is kept for idempotent replay (others release the key). */
export function isReplayable(status: number): boolean {
  if (status >= 500) return false;
  // Transient refusals: a retry with the same key should run again.
  return ![408, 409, 423, 425, 429, 499].includes(status);
}

function header(req: HttpRequest, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Build the gateway's plain-HTTP handler. */
export function createRestHandler(
  deps: GatewayDeps,
  routes: readonly RouteSpec[] = restRoutes,
): HttpHandler {
  // Protocol operations no route serves answer 501, not 404 (harn-surface.ts).
  const router = new Router([...routes, ...notServedRoutes(routes)]);

  const cors = loadCorsPolicy(deps.env);
  const jsonDepth = jsonDepthFor(requestLimitsFromEnv(deps.env));
  const jsonLimits = {
    maxBytes: deps.config.TRELLIS_MAX_BODY_BYTES,
    maxDepth: jsonDepth,
    structure: structureLimitsFromEnv(deps.env, jsonDepth),
  };

  return async (req, res) => {
    let url: URL;
    try {
      url = new URL(req.url ?? "/", "http://gateway.invalid");
    } catch {
      // An absolute-form target with a bad host, say: not a REST path.
      return false;
    }
    const path = url.pathname;
    if (path !== "/v1" && !path.startsWith("/v1/")) return false;
    const requestId = httpRequestId(req);
    const origin = header(req, "origin");
    for (const [name, value] of Object.entries(corsHeaders(cors, origin))) {
      res.setHeader(name, value);
    }
    if (
      req.method === "OPTIONS" &&
      origin !== undefined &&
      header(req, "access-control-request-method")
    ) {
      send(res, preflight(origin, path, requestId));
      return true;
    }
    const parent = extractTraceContext(req.headers);
    const method = req.method ?? "GET";
    const match = router.match(method, path.length > 3 ? path.replace(/\/+$/, "") : path);
    const routeName = match.kind === "found" ? match.route.path : "unmatched";
    const span = tracer.startSpan(
      `${method} ${routeName}`,
      {
        kind: SpanKind.SERVER,
        attributes: { "http.request.method": method, "http.route": routeName },
      },
      parent,
    );
    const active = trace.setSpan(parent, span);
    const started = performance.now();
    let handled = true;
    try {
      handled = await otelContext.with(active, () => serve(req, res, url, requestId, match));
    } finally {
      span.setAttribute("http.response.status_code", res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      if (deps.logger.enabled("debug")) {
        deps.logger.debug("rest request", {
          request_id: requestId,
          method,
          route: routeName,
          status: res.statusCode,
          duration_ms: Math.round(performance.now() - started),
        });
      }
    }
    return handled;
  };

  /** Answer a CORS preflight: 204 for an allowed origin and a known path. */
  function preflight(origin: string, path: string, requestId: string): RestResponse {
    const allow = cors.allowOrigin(origin);
    if (allow === undefined) {
      return errorResponse(
        harnError(
          "permission_denied",
          `origin ${JSON.stringify(origin.slice(0, 200))} may not call this API from a browser`,
          {
            requestId,
            param: "Origin",
          },
        ),
      );
    }
    const match = router.match("OPTIONS", path.length > 3 ? path.replace(/\/+$/, "") : path);
    if (match.kind !== "method_not_allowed") {
      return errorResponse(
        harnError("resource_not_found", `no such endpoint: ${path}`, { requestId }),
      );
    }
    return { status: 204, body: "", headers: preflightHeaders(allow, match.allow) };
  }

  /** Serve a request; false when it was handed on to another module's handler. */
  async function serve(
    req: HttpRequest,
    res: HttpResponse,
    url: URL,
    requestId: string,
    match: ReturnType<typeof router.match>,
  ): Promise<boolean> {
    res.setHeader(protocolVersionHeader, currentProtocolVersion);
    let response: RestResponse | typeof handOn | undefined;
    try {
      response = await dispatch(req, res, url, requestId, match);
    } catch (error) {
      if (clientWentAway(req, res, error)) {
        deps.logger.debug("rest request abandoned by the client", {
          request_id: requestId,
          method: req.method,
          path: url.pathname,
        });
        // 499: what the access log records; nothing is sent.
        res.statusCode = 499;
        if (!res.destroyed) res.destroy();
        return true;
      }
      const envelope = toHarnError(inputRejectedByDatabase(error) ?? error, requestId);
      logFailure(envelope, {
        request_id: requestId,
        method: req.method,
        path: url.pathname,
        error,
      });
      response = errorResponse(envelope);
    }
    if (response === handOn) return false;
    if (response !== undefined) send(res, response);
    return true;
  }

  /**
   * Log a request that failed on the server's side: a dependency that did not
   * answer (503, retryable) is a warning, anything else but 501 an error.
   */
  function logFailure(envelope: HarnErrorResponse, fields: LogFields): void {
    // 501: a deliberate answer (an operation or provider not offered), no fault.
    if (envelope.status === 501) return;
    if (envelope.status === 503) {
      deps.logger.warn("rest request failed: a dependency is unavailable", fields);
    } else if (envelope.status >= 500) {
      deps.logger.error("rest request failed", fields);
    }
  }

  async function dispatch(
    req: HttpRequest,
    res: HttpResponse,
    url: URL,
    requestId: string,
    match: ReturnType<typeof router.match>,
  ): Promise<RestResponse | typeof handOn | undefined> {
    if (match.kind === "not_found") {
      return errorResponse(
        harnError("resource_not_found", `no such endpoint: ${req.method} ${url.pathname}`, {
          requestId,
        }),
      );
    }
    if (match.kind === "method_not_allowed") {
      const error = harnError(
        "invalid_request",
        `method ${req.method} is not allowed on ${url.pathname}; allowed: ${match.allow.join(", ")}`,
        { requestId, headers: { allow: match.allow.join(", ") } },
      );
      return errorResponse({ ...error, status: 405 });
    }
    const { route, params } = match;

    // Who may call the route: its entry in the one authorization table.
    const rule = route.scope;
    let caller = anonymous;
    if (rule !== "public") {
      const version = checkProtocolVersion(req.headers[protocolVersionHeader]);
      if (!version.ok) {
        const message =
          version.reason === "missing"
            ? `the Harn-Agents-Protocol-Version header is required; supported: ${supportedProtocolVersions.join(", ")}`
            : `protocol version ${JSON.stringify(version.given?.slice(0, 64))} is not supported; supported: ${supportedProtocolVersions.join(", ")}`;
        return errorResponse(
          harnError("unsupported_protocol_version", message, {
            requestId,
            param: "Harn-Agents-Protocol-Version",
            details: { supported_versions: [...supportedProtocolVersions] },
          }),
        );
      }
      const auth = await deps.authenticator.authenticate(
        header(req, "authorization"),
        req.socket?.remoteAddress,
      );
      if (!auth.ok) {
        return errorResponse(authRefusal(auth.failure, requestId, auth.retryAfterSeconds));
      }
      caller = auth.caller;
      const decision = authorize(caller.scopes, rule);
      if (!decision.allowed) {
        return errorResponse(
          harnError("permission_denied", decision.message, {
            requestId,
            details: { required_scope: decision.requiredScope ?? "" },
            ...(decision.requiredScope && decision.requiredScope !== "*"
              ? {
                  headers: {
                    "www-authenticate": `Bearer realm="trellis", error="insufficient_scope", scope="${decision.requiredScope}"`,
                  },
                }
              : {}),
          }),
        );
      }
    }

    checkTextInputs(params, url.searchParams);
    if (route.delegateTo !== undefined) {
      await route.beforeHandOn?.({
        req,
        res,
        requestId,
        params,
        query: url.searchParams,
        caller,
        body: undefined,
        idempotencyKey: "",
        options: (overrides = {}) =>
          outgoingOptions(req, requestId, caller, overrides.streaming ?? false),
        deps,
      });
      if (deps.mode === "embedded") {
        // The owning module's handler comes after this one on the same server.
        stampCaller(req, caller, deps.mesh);
        return handOn;
      }
      return forwardHttp(req, serviceUrl(route.delegateTo, deps.env as NodeJS.ProcessEnv), {
        caller,
        requestId,
        mesh: deps.mesh,
        timeoutMs: deps.config.TRELLIS_UPSTREAM_TIMEOUT,
        maxBodyBytes: deps.config.TRELLIS_MAX_BODY_BYTES,
      });
    }

    let body: JsonValue | undefined;
    if (req.method === "POST" || req.method === "PUT" || req.method === "PATCH") {
      body = await readJsonBody(req, jsonLimits);
    }

    const call: RestCall = {
      req,
      res,
      requestId,
      params,
      query: url.searchParams,
      caller,
      body,
      idempotencyKey: "",
      options: (overrides = {}) =>
        outgoingOptions(req, requestId, caller, overrides.streaming ?? false),
      deps,
    };

    // Rate limits and hard quotas (quota/limits.ts) run before the route's work.
    const guarded = deps.limits?.wrap(route) ?? route;
    if (!route.write) return guarded.handle(call);
    const key = header(req, idempotencyKeyHeader);
    if (key === undefined) return guarded.handle(call);
    return runIdempotent(call, guarded, url.pathname, key);
  }

  function outgoingOptions(
    req: HttpRequest,
    requestId: string,
    caller: Caller,
    streaming: boolean,
  ): CallOptions {
    const headers = new Headers();
    if (caller !== anonymous) setCallerHeaders(headers, caller);
    headers.set(requestIdHeader, requestId);
    // Keep the caller's trace; the client tracing interceptor replaces it with
    // a child span when tracing is active in this process.
    for (const name of ["traceparent", "tracestate", "baggage"]) {
      const value = header(req, name);
      if (value) headers.set(name, value);
    }
    return { headers, timeoutMs: streaming ? 0 : deps.config.TRELLIS_UPSTREAM_TIMEOUT };
  }

  /**
   * Idempotent execution of a write (Harn v1 "Idempotency"). The first request
   * claims the scope and runs; an equivalent retry gets the stored response
   * (`Idempotent-Replayed: true`); a retry with another body gets 409
   * `idempotency_key_reused`; a retry while the first still runs waits for it
   * (up to TRELLIS_IDEMPOTENCY_WAIT), then gets 409 `conflict` with
   * `Retry-After` — it never runs the write a second time.
   */
  async function runIdempotent(
    call: RestCall,
    route: RouteSpec,
    target: string,
    key: string,
  ): Promise<RestResponse> {
    if (key.length < 1 || key.length > 255 || !/^[\x20-\x7e]+$/.test(key)) {
      throw new TrellisError({
        reason: "invalid_request",
        message: "Idempotency-Key must be 1–255 printable ASCII characters",
        param: "Idempotency-Key",
      });
    }
    const scope: IdempotencyScope = {
      actorId: call.caller.actorId,
      workspaceId: call.caller.workspaceId,
      method: route.method,
      target,
      key,
    };
    const requestHash = sha256Hex(canonicalJson(call.body ?? {}, { loneSurrogates: "escape" }));
    call.idempotencyKey = `idem_${scopeHash(scope)}`;
    const config = deps.config;
    const deadline = Date.now() + config.TRELLIS_IDEMPOTENCY_WAIT;
    let delay = 20;
    for (;;) {
      const claim = await deps.idempotency.claim(scope, requestHash, {
        leaseMs: config.TRELLIS_IDEMPOTENCY_LEASE,
        ttlMs: config.TRELLIS_IDEMPOTENCY_TTL,
      });
      switch (claim.kind) {
        case "mismatch":
          throw new TrellisError({
            reason: "idempotency_key_reused",
            message: "this Idempotency-Key was already used with a different request body",
            param: "Idempotency-Key",
          });
        case "replay":
          return {
            status: claim.response.status,
            body: withRequestId(claim.response.body, call.requestId),
            headers: { ...claim.response.headers, "idempotent-replayed": "true" },
          };
        case "in_flight": {
          const left = deadline - Date.now();
          if (left <= 0 || call.deps.closing.aborted) {
            return errorResponse(
              harnError(
                "conflict",
                "a request with this Idempotency-Key is still in progress; retry later",
                {
                  requestId: call.requestId,
                  param: "Idempotency-Key",
                  headers: { "retry-after": "1" },
                },
              ),
            );
          }
          await sleep(Math.min(delay, left), call.deps.closing);
          delay = Math.min(delay * 2, 250);
          continue;
        }
        case "claimed": {
          let response: RestResponse;
          try {
            response =
              (await route.handle(call)) ?? errorResponse(toHarnError(undefined, call.requestId));
          } catch (error) {
            const envelope = toHarnError(inputRejectedByDatabase(error) ?? error, call.requestId);
            logFailure(envelope, { request_id: call.requestId, path: target, error });
            response = errorResponse(envelope);
          }
          try {
            if (isReplayable(response.status) && typeof response.body === "string") {
              const kept: Record<string, string> = {};
              for (const name of ["content-type", "location"]) {
                const value = response.headers[name];
                if (value !== undefined) kept[name] = value;
              }
              await deps.idempotency.complete(
                claim.claim,
                { status: response.status, body: response.body, headers: kept },
                config.TRELLIS_IDEMPOTENCY_TTL,
              );
            } else {
              await deps.idempotency.release(claim.claim);
            }
          } catch (error) {
            // The write happened; only its record failed. The lease expires and
            // the downstream idempotency key still prevents a duplicate.
            deps.logger.warn("could not record idempotent response", {
              request_id: call.requestId,
              error,
            });
          }
          return response;
        }
      }
    }
  }
}

/** A stored error envelope names the request that produced it; a replay names the current one. */
function withRequestId(body: string, requestId: string): string {
  if (!body.startsWith('{"error":')) return body;
  try {
    const parsed = JSON.parse(body) as { error?: { request_id?: unknown } };
    if (parsed.error && typeof parsed.error === "object") {
      parsed.error.request_id = requestId;
      return JSON.stringify(parsed);
    }
  } catch {
    // Not ours to fix: send it as stored.
  }
  return body;
}
