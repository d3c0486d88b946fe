/**
 * The modules of the tasks store, as each of them sees the others. Built and
 * wired by `PostgresTaskStore`; a module calls another through this record
 * (type-only imports, so no module imports another at run time).
 *
 * Each module adds its own entry to {@link StoreParts} (a `declare module
 * "./store-parts.js"` block beside its class), so this file imports none of
 * them and the import graph has no cycle through it.
 *
 * | module | what it owns |
 * |---|---|
 * | `unit` (write-unit.ts) | the write transaction, its events and outbox unit, the session save statements, idempotency keys |
 * | `directory` | workspaces and agents |
 * | `sessions` | sessions: create, read, list, close, fork, truncate |
 * | `transcript` | a session's messages: append, list, read, load |
 * | `mailbox` | a session's queue: submit, claim, cancel, signals |
 * | `runs` | how a run and a task end: finish, progress, outcomes |
 * | `recovery` | leases: renewal, release, lost workers |
 * | `replays` | replays: source, create, read, end events |
 * | `resources` | tasks, outcomes, artifacts and events as resources |
 */
/** Every module of the store, by role (each module declares its own entry). */
// biome-ignore lint/suspicious/noEmptyInterface: filled by declaration merging in each module.
export interface StoreParts {}
