/**
 * Routes the gateway fronts for another service's own REST handler
 * (receipts): the gateway checks version, key and scope, then hands the
 * request on with the caller in the `x-trellis-*` headers, signed with the
 * service credentials (`x-trellis-mesh`).
 *
 * Embedded: the owning module's handler runs on the same server after the
 * gateway's, so handing on means stamping the headers onto the request and
 * declining it. Distributed: the request is forwarded over HTTP to the owning
 * service (`TRELLIS_<NAME>_URL`).
 */
import {
  type Caller,
  callerHeaders,
  type MeshCredentials,
  meshHeader,
  meshHttpTarget,
} from "@trellis/platform";
import { type HttpRequest, requestIdHeader, TrellisError } from "@trellis/runtime";
import type { RestResponse } from "./io.js";
import { readBody } from "./io.js";

/**
 * Replace whatever `x-trellis-*` headers the client sent with the
 * authenticated caller (a client must never choose its own identity), signed
 * with the service credentials as the owning handler requires.
 */
export function stampCaller(req: HttpRequest, caller: Caller, mesh: MeshCredentials): void {
  const headers = req.headers as Record<string, string | string[] | undefined>;
  for (const name of Object.keys(headers)) {
    if (name.toLowerCase().startsWith("x-trellis-")) delete headers[name];
  }
  headers[callerHeaders.actor] = caller.actorId;
  headers[callerHeaders.workspace] = caller.workspaceId;
  headers[callerHeaders.scopes] = caller.scopes.join(" ");
  headers[meshHeader] = mesh.sign(
    "gateway",
    meshHttpTarget(req.method ?? "GET", req.url ?? "/"),
    caller,
  );
}

// Request headers worth passing on (hop-by-hop and credentials are not).
const forwarded = ["content-type", "accept", "traceparent", "tracestate", "baggage"];

/** Forward a request to `baseUrl` over HTTP and return its response. */
export async function forwardHttp(
  req: HttpRequest,
  baseUrl: string,
  options: {
    caller: Caller;
    requestId: string;
    mesh: MeshCredentials;
    timeoutMs: number;
    maxBodyBytes: number;
  },
): Promise<RestResponse> {
  const target = new URL(req.url ?? "/", baseUrl);
  const method = req.method ?? "GET";
  const headers = new Headers();
  for (const name of forwarded) {
    const value = req.headers[name];
    const one = Array.isArray(value) ? value[0] : value;
    if (one) headers.set(name, one);
  }
  headers.set(requestIdHeader, options.requestId);
  headers.set(callerHeaders.actor, options.caller.actorId);
  headers.set(callerHeaders.workspace, options.caller.workspaceId);
  headers.set(callerHeaders.scopes, options.caller.scopes.join(" "));
  headers.set(
    meshHeader,
    options.mesh.sign(
      "gateway",
      meshHttpTarget(method, `${target.pathname}${target.search}`),
      options.caller,
    ),
  );
  const body =
    method === "GET" || method === "HEAD" ? undefined : await readBody(req, options.maxBodyBytes);
  let response: Response;
  try {
    response = await fetch(target, {
      method,
      headers,
      ...(body ? { body } : {}),
      signal: AbortSignal.timeout(options.timeoutMs),
    });
  } catch (error) {
    throw new TrellisError({
      reason: "service_unavailable",
      message: `the service behind ${target.pathname} is unavailable; retry later`,
      cause: error,
    });
  }
  const out: Record<string, string> = {};
  const type = response.headers.get("content-type");
  if (type) out["content-type"] = type;
  return {
    status: response.status,
    body: new Uint8Array(await response.arrayBuffer()),
    headers: out,
  };
}
