/**
 * Who is calling: set by the gateway after authentication, read by every
 * service to scope what the call may see.
 *
 * The gateway's interceptor stores the caller it authenticated in the Connect
 * context. Calls to other services carry it in the `x-trellis-*` headers
 * below, signed together with the call by a service credential (`mesh.ts`):
 * an internal service verifies the credential before it believes the headers
 * and stores the verified caller in the context, so spoofed headers from
 * outside the mesh never count. A call with no caller is an internal call
 * between services.
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

/** A getter of request headers (Connect `Headers`, Node's header object). */
export type HeaderGetter = (name: string) => string | null | undefined;

/**
 * The caller named by the `x-trellis-*` headers, or undefined when they name
 * none (an internal call). Only meaningful once the headers were verified.
 */
export function callerFromHeaders(get: HeaderGetter): Caller | undefined {
  const actorId = get(callerHeaders.actor);
  const workspaceId = get(callerHeaders.workspace);
  if (!actorId || !workspaceId) return undefined;
  const scopes = (get(callerHeaders.scopes) ?? "").split(/\s+/).filter((s) => s !== "");
  return { actorId, workspaceId, scopes };
}

/**
 * The caller of a request, or undefined for an internal call: the one the
 * gateway or the mesh interceptor stored in the context. The headers are read
 * directly only on a server without either (an embedded deployment without a
 * gateway, used in tests), where nothing is verified anyway.
 */
export function callerOf(context: HandlerContext): Caller | undefined {
  const fromContext = context.values.get(callerKey);
  if (fromContext) return fromContext;
  return callerFromHeaders((name) => context.requestHeader.get(name));
}

/**
 * Whether the caller holds the admin grant `*`: every action in every
 * workspace. Its own workspace is only where its requests land when they
 * name none.
 */
export function isAdminCaller(caller: Caller | undefined): boolean {
  return caller?.scopes.includes("*") ?? false;
}

/**
 * The workspace a caller is confined to, or undefined when it may act in
 * every workspace (an internal call, or an admin credential). Services scope
 * reads and writes with it; resources outside it are absent to the caller.
 */
export function confinedWorkspaceOf(caller: Caller | undefined): string | undefined {
  return caller === undefined || isAdminCaller(caller) ? undefined : caller.workspaceId;
}

/** Write a caller into outgoing headers (gateway → internal service). */
export function setCallerHeaders(headers: Headers, caller: Caller): void {
  headers.set(callerHeaders.actor, caller.actorId);
  headers.set(callerHeaders.workspace, caller.workspaceId);
  headers.set(callerHeaders.scopes, caller.scopes.join(" "));
}
