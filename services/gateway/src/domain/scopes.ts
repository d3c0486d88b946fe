/**
 * Scopes: what a credential (API key or OAuth2 access token) may do. Harn v1
 * "OAuth2 client credentials": token scopes map to resource actions such as
 * `sessions:read`, `tasks:write`. Which action each REST route and RPC needs
 * is in one table, `auth/scope-table.ts`.
 *
 * A grant is a scope, `<area>:*` (every action on one area) or `*` (every
 * action in every workspace: the admin key). OAuth clients and external
 * tokens only ever carry named scopes, so they stay inside their workspace.
 */

/** Every scope Trellis knows, in the order documentation lists them. */
export const scopeNames = [
  "workspaces:read",
  "agents:read",
  "agents:write",
  "sessions:read",
  "sessions:write",
  "tasks:read",
  "tasks:write",
  "events:read",
  "signals:write",
  "artifacts:read",
  "artifacts:write",
  "receipts:read",
  "webhooks:read",
  "webhooks:write",
  "vaults:read",
  "vaults:write",
  "memory:read",
  "memory:write",
  "keys:admin",
  "connectors:read",
  "connectors:write",
  "connectors:deliver",
] as const;

/** A named scope such as `tasks:write`. */
export type Scope = (typeof scopeNames)[number];

const known: ReadonlySet<string> = new Set(scopeNames);
const areas: ReadonlySet<string> = new Set(scopeNames.map((s) => s.slice(0, s.indexOf(":"))));

/** Whether `value` is a named scope. */
export function isScope(value: string): value is Scope {
  return known.has(value);
}

/** Whether `value` may be granted to an API key: a scope, `<area>:*` or `*`. */
export function isGrantableScope(value: string): boolean {
  if (value === "*" || known.has(value)) return true;
  return value.endsWith(":*") && areas.has(value.slice(0, -2));
}

/**
 * Named scopes that also grant others: webhooks were administration
 * (`keys:admin`) before they had scopes of their own, and keys:admin still
 * covers them.
 */
const impliedBy: Readonly<Partial<Record<Scope, readonly Scope[]>>> = {
  "webhooks:read": ["keys:admin"],
  "webhooks:write": ["keys:admin"],
};

/** Whether holding the named scope `holder` grants `required` (itself or a superset). */
export function implies(holder: string, required: Scope): boolean {
  return holder === required || (impliedBy[required]?.some((s) => s === holder) ?? false);
}

/** Whether `granted` allows `required`. */
export function hasScope(granted: readonly string[], required: Scope): boolean {
  const area = required.slice(0, required.indexOf(":"));
  const supersets = impliedBy[required] ?? [];
  return granted.some(
    (s) =>
      s === "*" ||
      s === required ||
      s === `${area}:*` ||
      supersets.some((sup) => s === sup || s === `${sup.slice(0, sup.indexOf(":"))}:*`),
  );
}

/** Whether every grant in `wanted` is covered by `granted` (no escalation). */
export function coversGrants(granted: readonly string[], wanted: readonly string[]): boolean {
  if (isAdmin(granted)) return true;
  return wanted.every((w) => {
    if (w === "*") return false;
    if (w.endsWith(":*")) {
      const area = w.slice(0, -2);
      return (
        granted.includes(w) ||
        scopeNames.filter((s) => s.startsWith(`${area}:`)).every((s) => hasScope(granted, s))
      );
    }
    return isScope(w) && hasScope(granted, w);
  });
}

/** Whether the grants include administration (every workspace, every action). */
export function isAdmin(granted: readonly string[]): boolean {
  return granted.includes("*");
}

/**
 * Scopes from a space-separated string (OAuth `scope` parameter / claim) or a
 * list (`scp` claim), deduplicated, in their given order.
 */
export function parseScopeList(value: unknown): string[] {
  const items =
    typeof value === "string"
      ? value.split(" ")
      : Array.isArray(value)
        ? value.filter((v): v is string => typeof v === "string")
        : [];
  return [...new Set(items.map((s) => s.trim()).filter((s) => s !== ""))];
}
