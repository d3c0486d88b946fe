import { TrellisError, type TrellisErrorOptions } from "@trellis/runtime";

/**
 * The errors storage raises itself are `TrellisError`s from @trellis/runtime
 * (one error class in the whole codebase; check with `isTrellisError`), with
 * domain "storage" and a core reason the error interceptor maps:
 * `invalid_request` (bad argument), `service_unavailable` (database down),
 * `internal_error` (a migration failed). Errors the database raises inside a
 * caller's query pass through unchanged.
 */
export function storageError(options: Omit<TrellisErrorOptions, "domain">): TrellisError {
  return new TrellisError({ ...options, domain: "storage" });
}
