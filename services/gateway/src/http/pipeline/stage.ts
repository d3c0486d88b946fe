/**
 * The REST pipeline: named stages composed like Connect interceptors. A stage
 * wraps the rest of the pipeline (`next`): it may answer instead (a refusal),
 * fill in the call (caller, body, idempotency key) and go on, or run code
 * around what follows (idempotency, limits). `../rest-handler.ts` composes
 *
 *   version → authenticate → authorize → params → hand-on → body
 *     → idempotency → limits → route
 *
 * Idempotency wraps the limits (not the other way round) so that a replayed
 * response or a retry waiting for the first one takes no rate-limit or quota
 * unit: only the run that executes the write is counted.
 */
import type { HttpRequest } from "@trellis/runtime";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";

/** One request in the pipeline. */
export interface Exchange {
  /** The matched route. */
  readonly route: RouteSpec;
  /** The request's URL (its path as sent: the idempotency target). */
  readonly url: URL;
  /** The one call the route receives; stages fill in caller, body and idempotency key. */
  readonly call: RestCall;
  /**
   * Set by the hand-on stage: another module's handler on this server serves
   * the request (embedded mode); nothing is sent from here.
   */
  handedOn: boolean;
}

/** A response to send, or undefined when one was written already (streams) or handed on. */
export type Outcome = RestResponse | undefined;

/** The rest of the pipeline. */
export type Next = (exchange: Exchange) => Promise<Outcome>;

/** A stage: given the rest of the pipeline, the pipeline from this stage on. */
export type Stage = (next: Next) => Next;

/** The stages in order, in front of `last`. */
export function compose(stages: readonly Stage[], last: Next): Next {
  return stages.reduceRight<Next>((next, stage) => stage(next), last);
}

/** The last stage: the route's handler. */
export const routeStage: Next = (exchange) => exchange.route.handle(exchange.call);

/** A request header's (first) value. */
export function requestHeader(req: HttpRequest, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}
