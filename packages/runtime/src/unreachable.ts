/**
 * Whether an error means a dependency (PostgreSQL, NATS, another service) could
 * not be reached or dropped the connection — a transient condition the caller
 * should retry — rather than a bug. The error interceptor answers those with
 * `Unavailable` (`service_unavailable`, retryable) instead of `Internal`.
 *
 * Recognised: Node socket errors (ECONNRESET, ECONNREFUSED, EPIPE, ETIMEDOUT,
 * EHOSTUNREACH, ENETUNREACH, …), PostgreSQL SQLSTATE class 08 (connection
 * exception) and 57P01–57P03 (server shutting down / starting), and node-pg's
 * own "Connection terminated" / connect-timeout errors. Causes are followed
 * (`error.cause`, AggregateError) a few levels deep.
 */
const socketCodes = new Set([
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTCONN",
  "EAI_AGAIN",
]);
const postgresShutdown = new Set(["57P01", "57P02", "57P03"]);
const pgMessages = [
  /^Connection terminated/i,
  /timeout exceeded when trying to connect/i,
  /Client has encountered a connection error/i,
];

export function isUnreachableError(error: unknown, depth = 0): boolean {
  if (depth > 4 || typeof error !== "object" || error === null) return false;
  const { code, message, cause } = error as { code?: unknown; message?: unknown; cause?: unknown };
  if (typeof code === "string") {
    if (socketCodes.has(code) || postgresShutdown.has(code)) return true;
    if (/^08[0-9A-Z]{3}$/.test(code)) return true;
  }
  if (typeof message === "string" && pgMessages.some((re) => re.test(message))) return true;
  if (error instanceof AggregateError && error.errors.some((e) => isUnreachableError(e, depth + 1)))
    return true;
  return isUnreachableError(cause, depth + 1);
}
