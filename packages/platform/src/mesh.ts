/**
 * Service credentials: how an internal service knows a call came from the
 * gateway or another Trellis service, and that the caller it names was
 * authenticated by the gateway.
 *
 * Every service of one deployment shares a secret (`TRELLIS_MESH_SECRET`, or a
 * file named by `TRELLIS_MESH_SECRET_FILE`, e.g. a mounted Kubernetes Secret).
 * A caller inside the mesh puts a short-lived token in the `x-trellis-mesh`
 * header of every call:
 *
 *   v1.<peer>.<expiry, ms since epoch, base 36>.<HMAC-SHA256, base64url>
 *
 * The MAC covers the peer, the expiry, the call's target (`/pkg.Service/Method`
 * for RPCs, `METHOD /path?query` for plain HTTP) and the caller headers
 * (`x-trellis-actor`, `-workspace`, `-scopes`). So a token cannot be minted
 * without the secret, cannot be reused for another method or another caller,
 * and stops working after its lifetime (60 s): spoofed caller headers from
 * outside the mesh are refused, with or without a stolen token. A signer
 * reuses its token for the same (peer, target, caller) for half that
 * lifetime, and a verifier remembers the tokens whose MAC it checked (for the
 * exact target and caller they cover), so a steady stream of calls pays for
 * one HMAC per method and caller every 30 s instead of two per call.
 *
 * The request body is not covered: a token sniffed on the pod network can be
 * replayed against the same method within its lifetime. Encrypt the pod
 * network (mTLS) where that matters.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";
import { readFileSync } from "node:fs";
import type { Interceptor } from "@connectrpc/connect";
import { meshVerifiedKey, TrellisError } from "@trellis/runtime";
import { type Caller, callerFromHeaders, callerKey } from "./caller.js";

/** Header carrying the mesh token. */
export const meshHeader = "x-trellis-mesh";
/** Env variable holding the shared secret. */
export const meshSecretVariable = "TRELLIS_MESH_SECRET";
/** Env variable naming a file that holds the shared secret (a mounted Secret). */
export const meshSecretFileVariable = "TRELLIS_MESH_SECRET_FILE";

/** Shortest accepted secret (characters): 32, e.g. `openssl rand -base64 32` gives 44. */
export const minMeshSecretLength = 32;

const version = "v1";
const peerPattern = /^[a-z0-9_-]{1,40}$/;
const defaultTtlMs = 60_000;
// Clocks of different hosts disagree a little: a token whose expiry is up to
// this far beyond the lifetime is still accepted.
const clockSkewMs = 30_000;
// Entries of each token cache (signed, verified) before it is emptied: far
// above the (peer, method, caller) combinations a process sees in 30 s.
const cacheLimit = 10_000;

/** Why a mesh token was refused. */
export type MeshFailure = "missing" | "malformed" | "expired" | "bad_signature";

/** Result of {@link MeshCredentials.verify}. */
export type MeshVerification = { ok: true; peer: string } | { ok: false; failure: MeshFailure };

/** Options of {@link MeshCredentials}. */
export interface MeshCredentialsOptions {
  /** Lifetime of a token (default 60 s). */
  ttlMs?: number;
  now?: () => number;
}

/** The signed target of a plain-HTTP request. */
export function meshHttpTarget(method: string, url: string): string {
  return `${method.toUpperCase()} ${url}`;
}

/** The signed target of an RPC. */
export function meshRpcTarget(serviceTypeName: string, methodName: string): string {
  return `/${serviceTypeName}/${methodName}`;
}

/** A human-readable reason (sent to the refused caller; names no secret). */
export function meshFailureMessage(failure: MeshFailure): string {
  switch (failure) {
    case "missing":
      return "this service only accepts calls from the Trellis gateway and other Trellis services; call the gateway";
    case "malformed":
      return "the x-trellis-mesh service credential is malformed";
    case "expired":
      return "the x-trellis-mesh service credential has expired";
    case "bad_signature":
      return "the x-trellis-mesh service credential is not valid here (is TRELLIS_MESH_SECRET the same on every service?)";
  }
}

/**
 * Signs and checks mesh tokens with one shared secret. Build it once per
 * process (the host does) and share it.
 */
export class MeshCredentials {
  /** The shared secret as given (only ever an input of key derivation). */
  readonly #secret: Buffer;
  readonly #key: Buffer;
  readonly #ttlMs: number;
  readonly #now: () => number;
  // Tokens signed, per (peer, target, caller): reused for the first half of
  // their life, so a caller signs once per 30 s per method and caller, not
  // once per call; every reused token still has ≥ half its lifetime left.
  readonly #signed = new Map<string, { token: string; reuseUntil: number }>();
  // Tokens whose MAC this process checked, with the input it covered: a
  // token presented again for the same target and caller skips the HMAC (the
  // expiry is still checked on every call). Keyed by the token and the exact
  // signed input, so a token is never accepted for another target or caller.
  readonly #verified = new Map<string, number>();

  constructor(secret: string | Uint8Array, options: MeshCredentialsOptions = {}) {
    const raw = typeof secret === "string" ? Buffer.from(secret, "utf8") : Buffer.from(secret);
    if (raw.byteLength < minMeshSecretLength) {
      throw new TrellisError({
        reason: "config_invalid",
        message: `${meshSecretVariable} must be at least ${minMeshSecretLength} characters (e.g. openssl rand -base64 32)`,
        param: meshSecretVariable,
      });
    }
    this.#secret = raw;
    // A key of its own, so the secret is never used directly for anything else.
    this.#key = createHmac("sha256", raw).update("trellis mesh credentials v1").digest();
    this.#ttlMs = options.ttlMs ?? defaultTtlMs;
    this.#now = options.now ?? Date.now;
  }

  /** Credentials with a fresh random secret (embedded mode, one process). */
  static generate(options: MeshCredentialsOptions = {}): MeshCredentials {
    return new MeshCredentials(randomBytes(32).toString("base64url"), options);
  }

  /**
   * A 32-byte key for another purpose of the deployment, derived from the
   * shared secret with HKDF-SHA256 (`label` as the info; distinct labels give
   * independent keys, and none reveals the secret or the token key).
   */
  deriveKey(label: string): Buffer {
    return Buffer.from(hkdfSync("sha256", this.#secret, "trellis", label, 32));
  }

  /** A token for a call by `peer` to `target`, on behalf of `caller` (none: internal call). */
  sign(peer: string, target: string, caller: Caller | undefined): string {
    if (!peerPattern.test(peer)) throw new Error(`invalid mesh peer name ${JSON.stringify(peer)}`);
    const now = this.#now();
    const key = macInput(peer, "", target, caller);
    const cached = this.#signed.get(key);
    if (cached !== undefined && now < cached.reuseUntil) return cached.token;
    const expires = (now + this.#ttlMs).toString(36);
    const token = `${version}.${peer}.${expires}.${this.#mac(peer, expires, target, caller)}`;
    if (this.#signed.size >= cacheLimit) this.#signed.clear();
    this.#signed.set(key, { token, reuseUntil: now + this.#ttlMs / 2 });
    return token;
  }

  /** Check a token presented for `target` with the caller headers it came with. */
  verify(
    token: string | null | undefined,
    target: string,
    caller: Caller | undefined,
  ): MeshVerification {
    if (token === null || token === undefined || token === "") {
      return { ok: false, failure: "missing" };
    }
    const parts = token.split(".");
    if (parts.length !== 4) return { ok: false, failure: "malformed" };
    const [tag, peer, expires, mac] = parts as [string, string, string, string];
    if (tag !== version || !peerPattern.test(peer) || !/^[0-9a-z]{1,12}$/.test(expires)) {
      return { ok: false, failure: "malformed" };
    }
    if (!/^[A-Za-z0-9_-]{43}$/.test(mac)) return { ok: false, failure: "malformed" };
    const input = macInput(peer, expires, target, caller);
    const checked = `${mac}\u0000${input}`;
    const expiresAt = Number.parseInt(expires, 36);
    if (this.#verified.get(checked) !== expiresAt) {
      const expected = Buffer.from(this.#macOf(input), "utf8");
      const given = Buffer.from(mac, "utf8");
      if (expected.length !== given.length || !timingSafeEqual(expected, given)) {
        return { ok: false, failure: "bad_signature" };
      }
    }
    const now = this.#now();
    if (expiresAt <= now || expiresAt > now + this.#ttlMs + clockSkewMs) {
      this.#verified.delete(checked);
      return { ok: false, failure: "expired" };
    }
    if (this.#verified.size >= cacheLimit) this.#verified.clear();
    this.#verified.set(checked, expiresAt);
    return { ok: true, peer };
  }

  #mac(peer: string, expires: string, target: string, caller: Caller | undefined): string {
    return this.#macOf(macInput(peer, expires, target, caller));
  }

  #macOf(input: string): string {
    return createHmac("sha256", this.#key).update(input).digest("base64url");
  }
}

/** What a token's MAC covers. JSON keeps the fields apart whatever they contain. */
function macInput(
  peer: string,
  expires: string,
  target: string,
  caller: Caller | undefined,
): string {
  return JSON.stringify([
    peer,
    expires,
    target,
    caller?.actorId ?? "",
    caller?.workspaceId ?? "",
    caller?.scopes.join(" ") ?? "",
  ]);
}

/**
 * The shared secret from `TRELLIS_MESH_SECRET` or the file named by
 * `TRELLIS_MESH_SECRET_FILE`; undefined when neither is set.
 */
export function meshCredentialsFromEnv(
  env: Readonly<Record<string, string | undefined>>,
  options: MeshCredentialsOptions = {},
): MeshCredentials | undefined {
  const inline = env[meshSecretVariable];
  const file = env[meshSecretFileVariable];
  if (inline && file) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `set ${meshSecretVariable} or ${meshSecretFileVariable}, not both`,
      param: meshSecretFileVariable,
    });
  }
  if (inline) return new MeshCredentials(inline.trim(), options);
  if (file) {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch (error) {
      throw new TrellisError({
        reason: "config_invalid",
        message: `${meshSecretFileVariable}: cannot read ${file} (${(error as NodeJS.ErrnoException).code ?? "error"})`,
        param: meshSecretFileVariable,
      });
    }
    return new MeshCredentials(text.trim(), options);
  }
  return undefined;
}

let processCredentials: MeshCredentials | undefined;

/**
 * The credentials of this process, for services started without a secret in
 * the environment they were given: from the process's own environment when
 * it has `TRELLIS_MESH_SECRET` (children started with it share them), else
 * made once, so services in this process can call each other and nothing
 * outside it can call them (fail closed).
 */
export function processMeshCredentials(): MeshCredentials {
  processCredentials ??= meshCredentialsFromEnv(process.env) ?? MeshCredentials.generate();
  return processCredentials;
}

/**
 * Client interceptor: signs every outgoing call as `peer`, covering the
 * caller headers present when the call is sent (set them in an interceptor
 * placed before this one, or in the call options).
 */
export function createMeshClientInterceptor(
  credentials: MeshCredentials,
  peer: string,
): Interceptor {
  return (next) => (req) => {
    const caller = callerFromHeaders((name) => req.header.get(name));
    req.header.set(
      meshHeader,
      credentials.sign(peer, meshRpcTarget(req.service.typeName, req.method.name), caller),
    );
    return next(req);
  };
}

/**
 * Server interceptor of an internal service: refuses (Unauthenticated) every
 * call without a valid mesh token, and stores the verified caller (or none,
 * for an internal call) in the context under `callerKey`. The runtime's
 * built-in health and reflection services do not pass through it.
 */
export function createMeshServerInterceptor(credentials: MeshCredentials): Interceptor {
  return (next) => (req) => {
    const caller = callerFromHeaders((name) => req.header.get(name));
    const result = credentials.verify(
      req.header.get(meshHeader),
      meshRpcTarget(req.service.typeName, req.method.name),
      caller,
    );
    if (!result.ok) throw meshError(result.failure);
    req.contextValues.set(callerKey, caller);
    // The runtime's request checks leave the field caps to the edge.
    req.contextValues.set(meshVerifiedKey, true);
    return next(req);
  };
}

/** The domain error of a refused mesh token. */
export function meshError(failure: MeshFailure): TrellisError {
  return new TrellisError({
    reason: "unauthenticated",
    message: meshFailureMessage(failure),
    domain: "mesh",
    metadata: { credential: "service", problem: failure },
  });
}

/** The minimal request shape {@link verifyMeshHttp} reads. */
export interface MeshHttpRequest {
  method?: string | undefined;
  url?: string | undefined;
  headers: Readonly<Record<string, string | string[] | undefined>>;
}

function headerOf(req: MeshHttpRequest, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/**
 * Whether an RPC request (`POST /<service>/<method>`, before it is decoded)
 * carries a valid service credential for its path and caller headers: the
 * runtime then leaves its bytes out of the structure scan
 * (`createService({ trustedRequest })`); the mesh interceptor still checks
 * the call.
 */
export function meshSignedRpc(credentials: MeshCredentials, req: MeshHttpRequest): boolean {
  const token = headerOf(req, meshHeader);
  if (token === undefined) return false;
  const path = (req.url ?? "").split("?", 1)[0] ?? "";
  const caller = callerFromHeaders((name) => headerOf(req, name));
  return credentials.verify(token, path, caller).ok;
}

/** Check the mesh token of a plain-HTTP request (REST handlers of internal services). */
export function verifyMeshHttp(
  credentials: MeshCredentials,
  req: MeshHttpRequest,
): MeshVerification {
  const caller = callerFromHeaders((name) => headerOf(req, name));
  return credentials.verify(
    headerOf(req, meshHeader),
    meshHttpTarget(req.method ?? "GET", req.url ?? "/"),
    caller,
  );
}
