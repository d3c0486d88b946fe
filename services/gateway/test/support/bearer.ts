/** Credentials of a Connect/gRPC client in the gateway's tests. */
import type { Interceptor } from "@connectrpc/connect";

/** Sends `key` as the bearer credential of every call. */
export function bearer(key: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${key}`);
    return next(req);
  };
}
