/** How the REST surface logs a request that failed. */
import type { LogFields, Logger } from "@trellis/runtime";
import type { HarnErrorResponse } from "../../domain/errors.js";

/**
 * Log a request that failed on the server's side: a dependency that did not
 * answer (503, retryable) is a warning, anything else but 501 an error.
 */
export function logFailure(logger: Logger, envelope: HarnErrorResponse, fields: LogFields): void {
  // 501: a deliberate answer (an operation or provider not offered), no fault.
  if (envelope.status === 501) return;
  if (envelope.status === 503) {
    logger.warn("rest request failed: a dependency is unavailable", fields);
  } else if (envelope.status >= 500) {
    logger.error("rest request failed", fields);
  }
}
