/**
 * The REST + SSE surface, as the server's plain-HTTP handler.
 *
 * For a request under `/v1` this handler sets CORS headers (answering a
 * preflight), matches the route (unknown path → 404, known path with another
 * method → 405; a protocol operation no route serves reaches a route
 * answering 501 `not_implemented` once authenticated, `harn-surface.ts`),
 * opens the request's span, builds the one {@link RestCall} the route will
 * get, and runs it through the pipeline of named stages (`pipeline/`):
 *
 *   version (426) → authenticate (401) → authorize (403) → params (400)
 *     → hand-on (receipts) → body (413 / 400) → idempotency (replay / 409)
 *     → limits (429) → route
 *
 * A stage that throws, or a route, is answered here with the Harn envelope.
 * Every response carries `x-request-id` (set by the runtime) and every error
 * the Harn envelope with the same id in `request_id`.
 */
import { context as otelContext, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import {
  extractTraceContext,
  type HttpHandler,
  type HttpRequest,
  type HttpResponse,
  httpRequestId,
  inputRejectedByDatabase,
  jsonDepthFor,
  requestLimitsFromEnv,
  structureLimitsFromEnv,
} from "@trellis/runtime";
import { harnError, toHarnError } from "../domain/errors.js";
import { currentProtocolVersion, protocolVersionHeader } from "../domain/protocol.js";
import { createRestCall } from "./call.js";
import { clientWentAway } from "./client-abort.js";
import type { GatewayDeps, RouteSpec } from "./context.js";
import { corsHeaders, loadCorsPolicy, preflightHeaders } from "./cors.js";
import { notServedRoutes } from "./harn-surface.js";
import { errorResponse, type RestResponse, send } from "./io.js";
import { authenticateStage } from "./pipeline/authenticate.js";
import { authorizeStage } from "./pipeline/authorize.js";
import { bodyStage } from "./pipeline/body.js";
import { logFailure } from "./pipeline/failure.js";
import { handOnStage } from "./pipeline/hand-on.js";
import { idempotencyStage } from "./pipeline/idempotency.js";
import { limitsStage } from "./pipeline/limits.js";
import { paramsStage } from "./pipeline/params.js";
import { compose, type Exchange, requestHeader, routeStage } from "./pipeline/stage.js";
import { versionStage } from "./pipeline/version.js";
import { routePortsOf } from "./ports.js";
import { Router } from "./router.js";
import { restRoutes } from "./routes/index.js";

const tracer = trace.getTracer("@trellis/gateway");
// Marks a request handed on to another module's HTTP handler (embedded mode).
const handedOn = Symbol("handed on");

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
  const ports = routePortsOf(deps);
  const pipeline = compose(
    [
      versionStage,
      authenticateStage(deps.authenticator, deps.clientSource),
      authorizeStage,
      paramsStage,
      handOnStage(deps),
      bodyStage(jsonLimits),
      idempotencyStage(deps),
      limitsStage(deps.limits),
    ],
    routeStage,
  );

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
    const origin = requestHeader(req, "origin");
    for (const [name, value] of Object.entries(corsHeaders(cors, origin))) {
      res.setHeader(name, value);
    }
    if (
      req.method === "OPTIONS" &&
      origin !== undefined &&
      requestHeader(req, "access-control-request-method")
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
    let response: RestResponse | typeof handedOn | undefined;
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
      logFailure(deps.logger, envelope, {
        request_id: requestId,
        method: req.method,
        path: url.pathname,
        error,
      });
      response = errorResponse(envelope);
    }
    if (response === handedOn) return false;
    if (response !== undefined) send(res, response);
    return true;
  }

  async function dispatch(
    req: HttpRequest,
    res: HttpResponse,
    url: URL,
    requestId: string,
    match: ReturnType<typeof router.match>,
  ): Promise<RestResponse | typeof handedOn | undefined> {
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
    // The one call the route gets; the stages fill in caller, body and idempotency key.
    const call = createRestCall({
      req,
      res,
      requestId,
      params,
      query: url.searchParams,
      ports,
      forwardTrace: true,
    });
    const exchange: Exchange = { route, url, call, handedOn: false };
    const response = await pipeline(exchange);
    return exchange.handedOn ? handedOn : response;
  }
}
