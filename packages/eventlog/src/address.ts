/**
 * Addressing shared by both backends: how an event's `(workspace, session,
 * resource)` becomes subject tokens, how filters match, and the validation
 * rules both implementations apply identically (so the contract suite sees
 * the same behaviour). Pure code: no I/O.
 */
import type { Event } from "@trellis/contracts/core";
import { invalidRequest } from "./errors.js";
import { type Cursor, type EventFilter, MAX_READ_LIMIT, NO_SESSION } from "./event-log.js";

/** Characters kept verbatim in a subject token (NATS' recommended set). */
const PLAIN_TOKEN = /^[A-Za-z0-9-][A-Za-z0-9_-]*$/;

/**
 * Encode any string as one subject-safe token, injectively.
 *
 * Ids made of `[A-Za-z0-9_-]` that do not start with `_` stay readable
 * (`task_12` → `task_12`); anything else becomes `_` + base64url of its UTF-8
 * (`a.b c` → `_YS5iIGM`). The leading `_` marks the encoded form, so a plain
 * id can never collide with an encoded one, and `""` encodes to `_`, which is
 * exactly {@link NO_SESSION}. Output uses only `[A-Za-z0-9_-]`: valid in
 * subjects, stream and consumer names.
 */
export function encodeToken(value: string): string {
  if (PLAIN_TOKEN.test(value)) return value;
  return `_${Buffer.from(value, "utf8").toString("base64url")}`;
}

/** Inverse of {@link encodeToken}. */
export function decodeToken(token: string): string {
  return token.startsWith("_") ? Buffer.from(token.slice(1), "base64url").toString("utf8") : token;
}

/** The session part of an address: `""` and {@link NO_SESSION} both mean "no session". */
export function sessionKey(sessionId: string): string {
  return sessionId === NO_SESSION ? "" : sessionId;
}

/** `<prefix>.events.<workspace>.<session>.<object>.<id>` for an (already validated) event. */
export function eventSubject(prefix: string, event: Event): string {
  const resource = event.resource!;
  return `${prefix}.events.${encodeToken(event.workspaceId)}.${encodeToken(sessionKey(event.sessionId))}.${encodeToken(resource.object)}.${encodeToken(resource.id)}`;
}

/** The subject filter of an {@link EventFilter} (`"*"` workspace = every event). */
export function filterSubject(prefix: string, filter: EventFilter | { workspaceId: "*" }): string {
  const base = `${prefix}.events`;
  if (filter.workspaceId === "*") return `${base}.>`;
  const f = filter as EventFilter;
  const ws = encodeToken(f.workspaceId);
  const session = f.sessionId === undefined ? "*" : encodeToken(sessionKey(f.sessionId));
  if (f.resource)
    return `${base}.${ws}.${session}.${encodeToken(f.resource.object)}.${encodeToken(f.resource.id)}`;
  if (f.sessionId !== undefined) return `${base}.${ws}.${session}.>`;
  return `${base}.${ws}.>`;
}

/** NATS subject matching (`*` = one token, `>` = one or more trailing tokens). */
export function subjectMatches(filter: string, subject: string): boolean {
  const f = filter.split(".");
  const s = subject.split(".");
  for (let i = 0; i < f.length; i++) {
    const token = f[i];
    if (token === ">") return s.length > i;
    if (i >= s.length) return false;
    if (token !== "*" && token !== s[i]) return false;
  }
  return f.length === s.length;
}

/** Whether an event falls inside a filter (the in-process twin of {@link filterSubject}). */
export function eventMatches(event: Event, filter: EventFilter | { workspaceId: "*" }): boolean {
  if (filter.workspaceId === "*") return true;
  const f = filter as EventFilter;
  if (event.workspaceId !== f.workspaceId) return false;
  if (f.sessionId !== undefined && sessionKey(event.sessionId) !== sessionKey(f.sessionId)) {
    return false;
  }
  if (f.resource) {
    const r = event.resource;
    if (!r || r.object !== f.resource.object || r.id !== f.resource.id) return false;
  }
  return true;
}

/**
 * The key of an event's per-resource sequence: its whole address, so both
 * backends agree (JetStream keeps the sequence per subject).
 */
export function resourceKey(event: Event): string {
  const r = event.resource!;
  return `${event.workspaceId}\u0000${sessionKey(event.sessionId)}\u0000${r.object}\u0000${r.id}`;
}

/** Reject events that cannot be addressed; runs before anything is stored. */
export function validateEvents(events: readonly Event[]): void {
  events.forEach((event, i) => {
    const at = `events[${i}]`;
    if (!event.id) throw invalidRequest("an event needs an id", `${at}.id`);
    if (!event.workspaceId)
      throw invalidRequest("an event needs a workspace_id", `${at}.workspace_id`);
    if (!event.resource?.object || !event.resource.id) {
      throw invalidRequest("an event needs a resource (object and id)", `${at}.resource`);
    }
  });
}

/** Reject filters that cannot be addressed. */
export function validateFilter(filter: EventFilter | { workspaceId: "*" }): void {
  if (!filter?.workspaceId)
    throw invalidRequest("a filter needs a workspace id", "filter.workspace_id");
  const f = filter as EventFilter;
  if (f.resource && (!f.resource.object || !f.resource.id)) {
    throw invalidRequest("a resource filter needs object and id", "filter.resource");
  }
}

/** The effective read limit: 1 … {@link MAX_READ_LIMIT}, default 1000. */
export function readLimit(limit: number | undefined): number {
  if (limit === undefined) return 1000;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_READ_LIMIT) {
    throw invalidRequest(`limit must be an integer in 1…${MAX_READ_LIMIT}`, "limit");
  }
  return limit;
}

/** Validate a position cursor (event-id cursors are resolved by each backend). */
export function positionOf(cursor: Cursor): bigint | undefined {
  if (!("afterPosition" in cursor)) return undefined;
  if (typeof cursor.afterPosition !== "bigint" || cursor.afterPosition < 0n) {
    throw invalidRequest("afterPosition must be a non-negative bigint", "after.after_position");
  }
  return cursor.afterPosition;
}

/**
 * Signal ids are dot-separated segments; each segment is one subject token.
 * `task_1.input` → `task_1.input`, `a b.c` → `_YSBi.c`.
 */
export function signalTokens(signalId: string): string {
  return signalId.split(".").map(encodeToken).join(".");
}

/** Validate a signal subscription prefix: `""` or whole segments ending in `"."`. */
export function validateSignalPrefix(prefix: string): void {
  if (prefix !== "" && !prefix.endsWith(".")) {
    throw invalidRequest(
      'a signal prefix is "" or whole dot-separated segments ending in "." (e.g. "task_1.")',
      "prefix",
    );
  }
}

/** Validate a JetStream subject prefix (`trellis`, `test.run_1`). */
export function validateSubjectPrefix(prefix: string): void {
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(prefix)) {
    throw invalidRequest(
      `subject prefix ${JSON.stringify(prefix)} must be dot-separated [A-Za-z0-9_-] tokens`,
      "prefix",
    );
  }
}
