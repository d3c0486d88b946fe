import { type HttpHandler, httpRequestId } from "@trellis/runtime";
import { type MeshCredentials, meshFailureMessage, meshHeader, verifyMeshHttp } from "./mesh.js";

/** Options of {@link meshGuardedHttp}. */
export interface MeshGuardOptions {
  /**
   * A request with no service credential at all is declined (the handler
   * returns false: it is not for this module) instead of refused with 401.
   * Embedded mode: the gateway did not hand it on.
   */
  declineUnsigned?: boolean;
  /** Name the request id in the 401 body (default true; embedded: false). */
  reportRequestId?: boolean;
}

/**
 * A plain-HTTP handler behind the service credential: a request whose
 * credential does not verify gets 401 with the error envelope.
 */
export function meshGuardedHttp(
  handler: HttpHandler,
  mesh: MeshCredentials,
  options: MeshGuardOptions = {},
): HttpHandler {
  return (req, res) => {
    if (options.declineUnsigned && req.headers[meshHeader] === undefined) return false;
    const result = verifyMeshHttp(mesh, req);
    if (result.ok) return handler(req, res);
    const requestId = options.reportRequestId === false ? "" : httpRequestId(req);
    const body = JSON.stringify({
      error: {
        code: "unauthenticated",
        message: meshFailureMessage(result.failure),
        type: "auth_error",
        param: null,
        request_id: requestId || null,
        details: { credential: "service", problem: result.failure },
      },
    });
    res.statusCode = 401;
    res.setHeader("content-type", "application/json; charset=utf-8");
    res.setHeader("content-length", String(Buffer.byteLength(body)));
    res.end(body);
    return true;
  };
}
