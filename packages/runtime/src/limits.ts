/**
 * How much a single request may ask of a server: its size and how deeply its
 * message nests. Every service applies the same limits to every protocol
 * (Connect, gRPC, gRPC-Web) and the gateway applies them to REST bodies, so a
 * request the gateway accepts is never refused for its size further in.
 */
import { type ConfigOf, env, loadConfig } from "./config.js";

/** Limits applied to every incoming request. */
export interface RequestLimits {
  /**
   * Largest request body (a unary message, one message of a stream, or a REST
   * body), in bytes. Larger → `ResourceExhausted` / REST 413 `payload_too_large`.
   */
  maxBodyBytes: number;
  /**
   * Deepest message nesting a request may have. Every `google.protobuf.Struct`,
   * `Value` and `ListValue` level counts, so this bounds free-form JSON fields
   * (agent definitions, metadata, tool arguments) that could otherwise nest
   * without end. Deeper → `InvalidArgument`.
   */
  maxNestingDepth: number;
}

/** The limits when nothing is configured: 16 MiB, and protobuf's usual recursion limit of 100. */
export const defaultRequestLimits: Readonly<RequestLimits> = {
  maxBodyBytes: 16 * 1024 * 1024,
  maxNestingDepth: 100,
};

/** Environment variables of {@link RequestLimits}. */
export const requestLimitsSchema = {
  /** Largest accepted request body or message, in bytes. */
  TRELLIS_MAX_BODY_BYTES: env.int({ min: 1024 }).default(defaultRequestLimits.maxBodyBytes),
  /** Deepest accepted message nesting (Struct / Value / ListValue levels included). */
  TRELLIS_MAX_NESTING_DEPTH: env
    .int({ min: 16, max: 10_000 })
    .default(defaultRequestLimits.maxNestingDepth),
};

/**
 * Read {@link RequestLimits} from an environment; a bad value throws a
 * `config_invalid` error naming the variable.
 *
 * @example requestLimitsFromEnv({ TRELLIS_MAX_BODY_BYTES: "1048576" }).maxBodyBytes // 1048576
 */
export function requestLimitsFromEnv(
  source: Readonly<Record<string, string | undefined>>,
): RequestLimits {
  const config: ConfigOf<typeof requestLimitsSchema> = loadConfig(requestLimitsSchema, source);
  return {
    maxBodyBytes: config.TRELLIS_MAX_BODY_BYTES,
    maxNestingDepth: config.TRELLIS_MAX_NESTING_DEPTH,
  };
}

/**
 * The deepest JSON nesting a REST body may have so that, once mapped to a
 * protobuf message, it stays within `maxNestingDepth`: each JSON object or
 * array level becomes two message levels (`Value` → `Struct` / `ListValue`),
 * and a few levels go to the request message that holds it.
 */
export function jsonDepthFor(limits: Pick<RequestLimits, "maxNestingDepth">): number {
  return Math.max(4, Math.floor((limits.maxNestingDepth - 8) / 2));
}
