/**
 * Domain errors leave every method of a service implementation as Connect
 * errors carrying an ErrorDetail. The server's error interceptor does the
 * same on the network, but in embedded mode services call each other's
 * handlers in memory, where no interceptor runs.
 */
import type { DescService } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { isTrellisError, toConnectError } from "./errors.js";

/** `impl` with every method's TrellisErrors turned into typed Connect errors. */
export function withErrorDetails<S extends DescService>(
  service: S,
  impl: ServiceImpl<S>,
): ServiceImpl<S> {
  const wrapped: Record<string, unknown> = {};
  const mapError = (error: unknown) => (isTrellisError(error) ? toConnectError(error) : error);
  for (const method of service.methods) {
    const fn = (impl as Record<string, (...args: unknown[]) => unknown>)[method.localName];
    if (!fn) continue;
    if (method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming") {
      wrapped[method.localName] = async function* (...args: unknown[]) {
        try {
          yield* fn.apply(impl, args) as AsyncIterable<unknown>;
        } catch (error) {
          throw mapError(error);
        }
      };
    } else {
      wrapped[method.localName] = async (...args: unknown[]) => {
        try {
          return await fn.apply(impl, args);
        } catch (error) {
          throw mapError(error);
        }
      };
    }
  }
  return wrapped as ServiceImpl<S>;
}
