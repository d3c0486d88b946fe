/**
 * What a REST route handler is given.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import type { Caller, Mode, ServiceClients } from "@trellis/platform";
import type { HttpRequest, HttpResponse, Logger } from "@trellis/runtime";
import type { Authenticator } from "../auth/authenticator.js";
import type { GatewayConfig } from "../config.js";
import type { Scope } from "../domain/scopes.js";
import type { IdempotencyStore } from "../store/idempotency-store.js";
import type { RestResponse } from "./io.js";

/** Everything the REST surface depends on; built once in the service factory. */
export interface GatewayDeps {
  clients: ServiceClients;
  authenticator: Authenticator;
  idempotency: IdempotencyStore;
  config: GatewayConfig;
  logger: Logger;
  /** Fires at shutdown: open streams end. */
  closing: AbortSignal;
  /** When this gateway started (the agent card's timestamps). */
  startedAt: Date;
  mode: Mode;
  /** The host's environment (where other services are, in distributed mode). */
  env: Readonly<Record<string, string | undefined>>;
}

/** One REST call being served. */
export interface RestCall {
  req: HttpRequest;
  res: HttpResponse;
  requestId: string;
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  /** The authenticated caller (an anonymous one on public routes). */
  caller: Caller;
  /** Parsed JSON body of a write (undefined when empty). */
  body: JsonValue | undefined;
  /**
   * The idempotency key to hand to internal services: derived from the
   * client's Idempotency-Key and its scope, so keys of different callers never
   * collide downstream. Empty when the client sent none.
   */
  idempotencyKey: string;
  /** Options for a call to an internal service on behalf of this request. */
  options(overrides?: { streaming?: boolean }): CallOptions;
  deps: GatewayDeps;
}

/** A REST route. */
export interface RouteSpec {
  method: "GET" | "POST";
  /** Path pattern, e.g. `/v1/sessions/{session_id}`. */
  path: string;
  /** Public discovery: no version header, no authentication. */
  public?: boolean;
  /** The scope the caller needs. */
  scope?: Scope;
  /** A non-idempotent write: takes `Idempotency-Key`. */
  write?: boolean;
  /** Writes its own (streaming) response and resolves to undefined. */
  stream?: boolean;
  /**
   * Served by another service's REST handler (`receipts`): the gateway checks
   * version, key and scope, then hands the request on (see `proxy.ts`).
   */
  delegateTo?: string;
  handle(call: RestCall): Promise<RestResponse | undefined>;
}
