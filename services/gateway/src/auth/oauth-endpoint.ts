/**
 * The OAuth2 endpoints of the gateway (plain HTTP, outside `/v1`):
 *
 * - `POST /oauth/token`: the client credentials grant (RFC 6749 §4.4). The
 *   body is `application/x-www-form-urlencoded` (`grant_type=client_credentials`,
 *   optional `scope`); the client authenticates with HTTP Basic
 *   (`client_secret_basic`) or with `client_id` + `client_secret` in the body
 *   (`client_secret_post`), never both. The answer is an access token
 *   (`tokens.ts`) with `token_type: Bearer`, `expires_in` and the granted
 *   `scope`; errors use RFC 6749 §5.2 (`{"error": "invalid_client", …}`),
 *   which OAuth client libraries expect here, not the Harn envelope.
 * - `GET /.well-known/jwks.json`: the public keys the gateway's tokens are
 *   signed with (RFC 7517), for resource servers that verify them themselves.
 *
 * Neither the secret nor the token is ever logged.
 */
import type { HttpHandler, HttpRequest, HttpResponse, Logger } from "@trellis/runtime";
import { httpRequestId } from "@trellis/runtime";
import { isScope, parseScopeList } from "../domain/scopes.js";
import type { OAuthClientStore } from "../store/oauth-client-store.js";
import type { AuthThrottle } from "./auth-throttle.js";
import { type ClientSourceOf, sourceOf } from "./client-source.js";
import type { AccessTokens } from "./tokens.js";

/** Path of the token endpoint. */
export const tokenPath = "/oauth/token";
/** Path of the key set. */
export const jwksPath = "/.well-known/jwks.json";

// A token request is a few hundred bytes.
const maxBodyBytes = 16 * 1024;

/** Dependencies of {@link createOAuthHandler}. */
export interface OAuthEndpointDeps {
  clients: OAuthClientStore;
  tokens: AccessTokens;
  logger: Logger;
  /** Failed client authentication per source address (`auth-throttle.ts`); none = unthrottled. */
  throttle?: AuthThrottle;
  /** The source a failure counts against (`client-source.ts`); default the peer. */
  clientSource?: ClientSourceOf;
}

type OAuthErrorCode =
  | "invalid_request"
  | "invalid_client"
  | "unsupported_grant_type"
  | "invalid_scope"
  | "temporarily_unavailable";

class OAuthError extends Error {
  constructor(
    readonly status: number,
    readonly code: OAuthErrorCode,
    readonly description: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(description);
  }
}

function send(
  res: HttpResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent || res.destroyed) return;
  const text = JSON.stringify(body);
  res.statusCode = status;
  res.setHeader("content-type", "application/json; charset=utf-8");
  res.setHeader("content-length", String(Buffer.byteLength(text)));
  for (const [name, value] of Object.entries(headers)) res.setHeader(name, value);
  res.end(text);
}

async function readForm(req: HttpRequest): Promise<URLSearchParams> {
  const type = String(req.headers["content-type"] ?? "")
    .split(";")[0]
    ?.trim()
    .toLowerCase();
  if (type !== "application/x-www-form-urlencoded") {
    throw new OAuthError(
      400,
      "invalid_request",
      "the token request must be application/x-www-form-urlencoded",
    );
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer | string>) {
    const buffer = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    size += buffer.byteLength;
    if (size > maxBodyBytes) {
      throw new OAuthError(
        413,
        "invalid_request",
        `the token request exceeds ${maxBodyBytes} bytes`,
      );
    }
    chunks.push(buffer);
  }
  const text = Buffer.concat(chunks).toString("utf8");
  if (text.includes("\uFFFD")) {
    throw new OAuthError(400, "invalid_request", "the token request is not valid UTF-8");
  }
  return new URLSearchParams(text);
}

/** One form parameter: absent or empty → undefined; repeated → invalid_request (RFC 6749 §3.2). */
function single(form: URLSearchParams, name: string): string | undefined {
  const values = form.getAll(name);
  if (values.length > 1) {
    throw new OAuthError(400, "invalid_request", `the parameter ${name} must not be repeated`);
  }
  const value = values[0];
  return value === undefined || value === "" ? undefined : value;
}

function formDecode(value: string): string {
  return decodeURIComponent(value.replace(/\+/g, " "));
}

/** Client id and secret from the request, and which method carried them. */
function clientCredentials(
  req: HttpRequest,
  form: URLSearchParams,
): { id: string; secret: string; basic: boolean } {
  const header = req.headers.authorization;
  const formId = single(form, "client_id");
  const formSecret = single(form, "client_secret");
  if (header !== undefined && header !== "") {
    const match = /^\s*Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
    if (!match?.[1]) {
      throw new OAuthError(
        401,
        "invalid_client",
        "the Authorization header must be Basic credentials",
        {
          "www-authenticate": 'Basic realm="trellis"',
        },
      );
    }
    if (formSecret !== undefined) {
      throw new OAuthError(
        400,
        "invalid_request",
        "authenticate the client with HTTP Basic or with client_secret in the body, not both",
      );
    }
    const decoded = Buffer.from(match[1], "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    let id: string;
    let secret: string;
    try {
      id = formDecode(colon < 0 ? decoded : decoded.slice(0, colon));
      secret = formDecode(colon < 0 ? "" : decoded.slice(colon + 1));
    } catch {
      throw new OAuthError(401, "invalid_client", "the Basic credentials are malformed", {
        "www-authenticate": 'Basic realm="trellis"',
      });
    }
    if (formId !== undefined && formId !== id) {
      throw new OAuthError(
        400,
        "invalid_request",
        "client_id in the body differs from the Basic credentials",
      );
    }
    return { id, secret, basic: true };
  }
  if (formId === undefined || formSecret === undefined) {
    throw new OAuthError(
      401,
      "invalid_client",
      "client authentication required: HTTP Basic, or client_id and client_secret in the body",
      { "www-authenticate": 'Basic realm="trellis"' },
    );
  }
  return { id: formId, secret: formSecret, basic: false };
}

/** The plain-HTTP handler of the OAuth endpoints (false for other paths). */
export function createOAuthHandler(deps: OAuthEndpointDeps): HttpHandler {
  return async (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0];
    if (path === jwksPath) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        send(
          res,
          405,
          { error: "invalid_request", error_description: "use GET" },
          { allow: "GET" },
        );
        return true;
      }
      send(res, 200, { keys: deps.tokens.publicKeys }, { "cache-control": "public, max-age=300" });
      return true;
    }
    if (path !== tokenPath) return false;
    const noStore = { "cache-control": "no-store", pragma: "no-cache" };
    try {
      if (req.method !== "POST") {
        throw new OAuthError(405, "invalid_request", "the token endpoint takes POST", {
          allow: "POST",
        });
      }
      const form = await readForm(req);
      const grant = single(form, "grant_type");
      if (grant === undefined)
        throw new OAuthError(400, "invalid_request", "grant_type is required");
      if (grant !== "client_credentials") {
        throw new OAuthError(
          400,
          "unsupported_grant_type",
          "only the client_credentials grant is supported",
        );
      }
      const credentials = clientCredentials(req, form);
      const source = sourceOf(deps, req) ?? "";
      const wait = deps.throttle?.retryAfterSeconds(source);
      if (wait !== undefined) {
        throw new OAuthError(
          429,
          "temporarily_unavailable",
          "too many failed authentication attempts from this address; retry later",
          { "retry-after": String(wait) },
        );
      }
      const client = await deps.clients.authenticate(credentials.id, credentials.secret);
      if (client === undefined) {
        deps.throttle?.failed(source);
        throw new OAuthError(
          401,
          "invalid_client",
          "unknown client, wrong secret, or the client was revoked",
          credentials.basic ? { "www-authenticate": 'Basic realm="trellis"' } : {},
        );
      }
      const requested = single(form, "scope");
      let scopes: string[];
      if (requested === undefined) {
        // RFC 6749 §3.3: no scope asked → the client's pre-registered scopes.
        scopes = [...client.scopes];
      } else {
        scopes = parseScopeList(requested);
        const refused = scopes.filter((s) => !isScope(s) || !client.scopes.includes(s));
        if (refused.length > 0) {
          throw new OAuthError(
            400,
            "invalid_scope",
            `this client may not be granted: ${refused.map((s) => JSON.stringify(s.slice(0, 64))).join(", ")}`,
          );
        }
      }
      if (!deps.tokens.canIssue) {
        throw new OAuthError(
          503,
          "temporarily_unavailable",
          "this gateway has no token signing key (set TRELLIS_OAUTH_SIGNING_KEY)",
        );
      }
      const issued = await deps.tokens.issue(client, scopes);
      deps.logger.info("access token issued", {
        request_id: httpRequestId(req),
        client_id: client.id,
        workspace_id: client.workspaceId,
        scope: scopes.join(" "),
        expires_in: issued.expiresInSec,
      });
      send(
        res,
        200,
        {
          access_token: issued.accessToken,
          token_type: "Bearer",
          expires_in: issued.expiresInSec,
          scope: scopes.join(" "),
        },
        noStore,
      );
    } catch (error) {
      if (error instanceof OAuthError) {
        send(
          res,
          error.status,
          { error: error.code, error_description: error.description },
          { ...noStore, ...error.headers },
        );
      } else {
        deps.logger.error("token request failed", { request_id: httpRequestId(req), error });
        send(
          res,
          500,
          {
            error: "server_error",
            error_description: `unexpected failure (request id ${httpRequestId(req)})`,
          },
          noStore,
        );
      }
    }
    return true;
  };
}
