/**
 * The modules of the tasks store, as each of them sees the others. Built and
 * wired by `PostgresTaskStore`; a module calls another through this record
 * (type-only imports here, so no module imports another at run time).
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
import type { Directory } from "./directory.js";
import type { Mailbox } from "./mailbox.js";
import type { Recovery } from "./recovery.js";
import type { Replays } from "./replays.js";
import type { Resources } from "./resources.js";
import type { Runs } from "./runs.js";
import type { Sessions } from "./sessions.js";
import type { Transcript } from "./transcript.js";
import type { WriteUnit } from "./write-unit.js";

/** Every module of the store, by role. */
export interface StoreParts {
  unit: WriteUnit;
  directory: Directory;
  sessions: Sessions;
  transcript: Transcript;
  mailbox: Mailbox;
  runs: Runs;
  recovery: Recovery;
  replays: Replays;
  resources: Resources;
}
