/**
 * Who is calling: set by the gateway after authentication, read by every
 * service to scope what the call may see.
 *
 * In embedded mode the gateway's interceptor stores the caller in the Connect
 * context. In distributed mode the gateway forwards it in the `x-trellis-*`
 * headers below, which internal services trust because only the gateway can
 * reach them (NetworkPolicy; service credentials come with the gateway issue).
 * A call with no caller is an internal call between services.
 */
import { createContextKey, type HandlerContext } from "@connectrpc/connect";

/** An authenticated principal. */
export interface Caller {
  /** Actor id (user, service account, connector). */
  actorId: string;
  /** The workspace the credentials are bound to. */
  workspaceId: string;
  /** Granted scopes, e.g. "tasks:write"; "*" grants all. */
  scopes: readonly string[];
}

/** Context key holding the {@link Caller} of a request. */
export const callerKey = createContextKey<Caller | undefined>(undefined, {
  description: "trellis caller",
});

/** Headers that carry the caller from the gateway to internal services. */
export const callerHeaders = {
  actor: "x-trellis-actor",
  workspace: "x-trellis-workspace",
  scopes: "x-trellis-scopes",
} as const;

/** The caller of a request, or undefined for an internal call. */
export function callerOf(context: HandlerContext): Caller | undefined {
  const fromContext = context.values.get(callerKey);
  if (fromContext) return fromContext;
  const actorId = context.requestHeader.get(callerHeaders.actor);
  const workspaceId = context.requestHeader.get(callerHeaders.workspace);
  if (!actorId || !workspaceId) return undefined;
  const scopes = (context.requestHeader.get(callerHeaders.scopes) ?? "")
    .split(/\s+/)
    .filter((s) => s !== "");
  return { actorId, workspaceId, scopes };
}

/** Write a caller into outgoing headers (gateway → internal service). */
export function setCallerHeaders(headers: Headers, caller: Caller): void {
  headers.set(callerHeaders.actor, caller.actorId);
  headers.set(callerHeaders.workspace, caller.workspaceId);
  headers.set(callerHeaders.scopes, caller.scopes.join(" "));
}
