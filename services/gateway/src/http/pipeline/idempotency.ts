/**
 * Stage `idempotency`: idempotent execution of a write (Harn v1
 * "Idempotency") that carries `Idempotency-Key`. The first request claims
 * the scope and runs; an equivalent retry gets the stored response
 * (`Idempotent-Replayed: true`); a retry with another body gets 409
 * `idempotency_key_reused`; a retry while the first still runs waits for it
 * (up to TRELLIS_IDEMPOTENCY_WAIT), then gets 409 `conflict` with
 * `Retry-After` — it never runs the write a second time. The call's
 * `idempotencyKey` (for internal services) is derived from the scope.
 */
import {
  canonicalJson,
  inputRejectedByDatabase,
  type Logger,
  sleep,
  TrellisError,
} from "@trellis/runtime";
import type { GatewayConfig } from "../../config.js";
import { sha256Hex } from "../../domain/canonical-json.js";
import { harnError, toHarnError } from "../../domain/errors.js";
import {
  type IdempotencyScope,
  type IdempotencyStore,
  scopeHash,
} from "../../store/idempotency-store.js";
import type { RestCall } from "../context.js";
import { errorResponse, type RestResponse } from "../io.js";
import { logFailure } from "./failure.js";
import { type Outcome, requestHeader, type Stage } from "./stage.js";

/** What idempotent execution needs. */
export interface IdempotencyPorts {
  idempotency: IdempotencyStore;
  config: Pick<
    GatewayConfig,
    "TRELLIS_IDEMPOTENCY_WAIT" | "TRELLIS_IDEMPOTENCY_LEASE" | "TRELLIS_IDEMPOTENCY_TTL"
  >;
  logger: Logger;
  /** Fires at shutdown: a retry stops waiting for the first request. */
  closing: AbortSignal;
}

/** Statuses whose response is kept for idempotent replay (others release the key). */
export function isReplayable(status: number): boolean {
  if (status >= 500) return false;
  // Transient refusals: a retry with the same key should run again.
  return ![408, 409, 423, 425, 429, 499].includes(status);
}

export function idempotencyStage(ports: IdempotencyPorts): Stage {
  return (next) => async (exchange) => {
    if (!exchange.route.write) return next(exchange);
    const key = requestHeader(exchange.call.req, "idempotency-key");
    if (key === undefined) return next(exchange);
    if (key.length < 1 || key.length > 255 || !/^[\x20-\x7e]+$/.test(key)) {
      throw new TrellisError({
        reason: "invalid_request",
        message: "Idempotency-Key must be 1–255 printable ASCII characters",
        param: "Idempotency-Key",
      });
    }
    const { call, route, url } = exchange;
    return runIdempotent(
      ports,
      { call, method: route.method, target: url.pathname, key, param: "Idempotency-Key" },
      () => next(exchange),
    );
  };
}

/** One idempotent write: whose, where, with which client key. */
export interface IdempotentWrite {
  /** The call; its `idempotencyKey` is set to the derived key. */
  call: RestCall;
  method: string;
  /** The path written to, as the client named it (part of the key's scope). */
  target: string;
  /** The client's key (already checked: 1–255 printable ASCII). */
  key: string;
  /** How the client sent the key, for error messages and `param`. */
  param: "Idempotency-Key" | "idempotency_key";
}

/**
 * Run `write` at most once for the write's scope and body (the rules in this
 * file's header). REST's stage and WebSocket command frames both use it, so
 * a key used on one transport is honoured on the other.
 */
export async function runIdempotent(
  ports: IdempotencyPorts,
  write: IdempotentWrite,
  run: () => Promise<Outcome>,
): Promise<RestResponse> {
  const { call, target, key, param } = write;
  const what = param === "Idempotency-Key" ? "request" : "command";
  const scope: IdempotencyScope = {
    actorId: call.caller.actorId,
    workspaceId: call.caller.workspaceId,
    method: write.method,
    target,
    key,
  };
  const requestHash = sha256Hex(canonicalJson(call.body ?? {}, { loneSurrogates: "escape" }));
  call.idempotencyKey = `idem_${scopeHash(scope)}`;
  const { config, idempotency, logger, closing } = ports;
  const deadline = Date.now() + config.TRELLIS_IDEMPOTENCY_WAIT;
  let delay = 20;
  for (;;) {
    const claim = await idempotency.claim(scope, requestHash, {
      leaseMs: config.TRELLIS_IDEMPOTENCY_LEASE,
      ttlMs: config.TRELLIS_IDEMPOTENCY_TTL,
    });
    switch (claim.kind) {
      case "mismatch":
        throw new TrellisError({
          reason: "idempotency_key_reused",
          message: `this ${param} was already used with a different ${what === "request" ? "request body" : "command"}`,
          param,
        });
      case "replay":
        return {
          status: claim.response.status,
          body: withRequestId(claim.response.body, call.requestId),
          headers: { ...claim.response.headers, "idempotent-replayed": "true" },
        };
      case "in_flight": {
        const left = deadline - Date.now();
        if (left <= 0 || closing.aborted) {
          return errorResponse(
            harnError(
              "conflict",
              `a ${what} with this ${param} is still in progress; retry later`,
              {
                requestId: call.requestId,
                param,
                headers: { "retry-after": "1" },
              },
            ),
          );
        }
        await sleep(Math.min(delay, left), closing);
        delay = Math.min(delay * 2, 250);
        continue;
      }
      case "claimed": {
        let response: RestResponse;
        try {
          response = (await run()) ?? errorResponse(toHarnError(undefined, call.requestId));
        } catch (error) {
          const envelope = toHarnError(inputRejectedByDatabase(error) ?? error, call.requestId);
          logFailure(logger, envelope, { request_id: call.requestId, path: target, error });
          response = errorResponse(envelope);
        }
        try {
          if (isReplayable(response.status) && typeof response.body === "string") {
            const kept: Record<string, string> = {};
            for (const name of ["content-type", "location"]) {
              const value = response.headers[name];
              if (value !== undefined) kept[name] = value;
            }
            await idempotency.complete(
              claim.claim,
              { status: response.status, body: response.body, headers: kept },
              config.TRELLIS_IDEMPOTENCY_TTL,
            );
          } else {
            await idempotency.release(claim.claim);
          }
        } catch (error) {
          // The write happened; only its record failed. The lease expires and
          // the downstream idempotency key still prevents a duplicate.
          logger.warn("could not record idempotent response", {
            request_id: call.requestId,
            error,
          });
        }
        return response;
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
