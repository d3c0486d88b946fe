/** Shared helpers of the REST routes: query values, workspace scoping, visibility, responses. */
import type { JsonValue } from "@bufbuild/protobuf";
import { SessionService, TaskService } from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { isAdmin } from "../../domain/scopes.js";
import type { RestCall } from "../context.js";
import { jsonResponse } from "../io.js";

export function queryString(call: RestCall, name: string): string | undefined {
  const value = call.query.get(name);
  return value === null || value === "" ? undefined : value;
}

/**
 * The workspace a request acts in: the one its credential is bound to, or
 * another one it names when the credential is an admin key. Any other
 * workspace is absent to the caller (404, Harn v1 "Authorization rules": no
 * hint that it exists).
 */
export function workspaceOf(call: RestCall, requested: string | undefined): string {
  if (requested === undefined || requested === "" || requested === call.caller.workspaceId) {
    return call.caller.workspaceId;
  }
  if (isAdmin(call.caller.scopes)) return requested;
  throw errors.notFound("workspace", requested);
}

/** The workspace a read names in its query (`workspace_id`), by the rule of {@link workspaceOf}. */
export function queryWorkspace(call: RestCall): string {
  return workspaceOf(call, queryString(call, "workspace_id"));
}

/** Hide resources of other workspaces from non-admin keys (as absent, Harn v1 "Authorization rules"). */
export function ensureVisible(
  call: Pick<RestCall, "caller">,
  workspaceId: string,
  object: string,
  id: string,
): void {
  if (workspaceId === "" || workspaceId === call.caller.workspaceId) return;
  if (isAdmin(call.caller.scopes)) return;
  throw errors.notFound(object, id);
}

export function required<T>(value: T | undefined, object: string, id: string): T {
  if (value === undefined) throw errors.notFound(object, id);
  return value;
}

/**
 * The resource a read by id returned, if the caller may see it: absent, or
 * another workspace's to a non-admin key, is the same 404.
 */
export function visible<T extends { workspaceId: string }>(
  call: Pick<RestCall, "caller">,
  found: T | undefined,
  object: string,
  id: string,
): T {
  const value = required(found, object, id);
  ensureVisible(call, value.workspaceId, object, id);
  return value;
}

export const ok = (body: JsonValue) => jsonResponse(200, body);
export const created = (body: JsonValue) => jsonResponse(201, body);
export const accepted = (body: JsonValue) => jsonResponse(202, body);

export function param(call: RestCall, name: string): string {
  const value = call.params[name];
  if (value === undefined) throw errors.invalid(`missing path parameter ${name}`, name);
  return value;
}

/** Load a session the caller may see (404 otherwise). */
export async function visibleSession(call: RestCall, id: string) {
  const { session } = await call.ports.clients
    .get(SessionService)
    .getSession({ sessionId: id }, call.options());
  return visible(call, session, "session", id);
}

/** Load a task the caller may see (404 otherwise). */
export async function visibleTask(call: RestCall, id: string) {
  const { task } = await call.ports.clients
    .get(TaskService)
    .getTask({ taskId: id }, call.options());
  return visible(call, task, "task", id);
}
