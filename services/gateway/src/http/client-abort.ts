/**
 * Requests the client abandoned: it closed the connection or reset the
 * stream before the whole body arrived or before the answer went out. That
 * is the client's choice, not a server failure — logged at debug, never as
 * an error and never answered (there is nobody to answer).
 */
import type { HttpRequest, HttpResponse } from "@trellis/runtime";

const abortCodes = new Set(["ECONNRESET", "ERR_STREAM_PREMATURE_CLOSE", "ECONNABORTED", "EPIPE"]);

/** Whether `error` (thrown while serving `req`) only says that the client went away. */
export function clientWentAway(req: HttpRequest, res: HttpResponse, error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === "string" && abortCodes.has(code)) return true;
  if (error instanceof Error && error.message === "aborted") return true;
  // The connection is gone and nothing was sent: whatever failed, nobody is waiting.
  return (req.destroyed || res.destroyed) && !res.headersSent && !req.complete;
}
