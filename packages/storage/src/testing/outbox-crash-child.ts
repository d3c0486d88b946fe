/**
 * Child process of the contract suite's crash tests (run with
 * `node --import tsx`; configured by the JSON in TRELLIS_CRASH_CHILD, see
 * {@link CrashChildConfig}). The parent SIGKILLs it, or it SIGKILLs itself,
 * at the moments the outbox must survive; stdout carries one JSON line per
 * committed transaction so the parent knows what was acknowledged.
 */
import { create } from "@bufbuild/protobuf";
import { EventSchema, ResourceRefSchema } from "@trellis/contracts/core";
import type { EventLog } from "@trellis/eventlog";
import { createDatabase, type DatabaseConfig } from "../create-database.js";
import { appendToOutbox } from "../outbox/outbox.js";
import { createOutboxRelay } from "../outbox/outbox-relay.js";
import { createRecordingEventLog } from "./recording-event-log.js";

/** What the parent asks the child to do. */
export interface CrashChildConfig {
  database: DatabaseConfig;
  schema: string;
  workspaceId: string;
  /**
   * `commit`: commit transactions until killed (no relay).
   * `relay-crash`: commit `transactions` transactions, then relay them into
   * the file-backed log at `logFile`, and SIGKILL itself right after the
   * `crashAfterAppends`-th successful append — published, not yet marked.
   * `relay-hold`: run a relay (into an in-memory log) and report when it is
   * the active one, then wait to be killed.
   */
  mode: "commit" | "relay-crash" | "relay-hold";
  resources: number;
  eventsPerTransaction: number;
  transactions?: number;
  logFile?: string;
  batchSize?: number;
  crashAfterAppends?: number;
}

/** A line the child prints: after each commit, or once its relay is active. */
export type ChildLine = { committed: string[] } | { active: true };

const config = JSON.parse(process.env.TRELLIS_CRASH_CHILD ?? "{}") as CrashChildConfig;
const database = await createDatabase(config.database);
const say = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);

const limit = config.mode === "commit" ? Number.POSITIVE_INFINITY : (config.transactions ?? 0);
for (let tx = 0; tx < limit; tx++) {
  const events = Array.from({ length: config.eventsPerTransaction }, (_, i) =>
    create(EventSchema, {
      kind: "test.crash",
      workspaceId: config.workspaceId,
      resource: create(ResourceRefSchema, {
        object: "task",
        id: `task_${(tx * config.eventsPerTransaction + i) % config.resources}`,
      }),
    }),
  );
  const stored = await database.kysely
    .transaction()
    .execute((trx) => appendToOutbox(trx, config.schema, events));
  say({ committed: stored.map((e) => e.id) } satisfies ChildLine);
}

if (config.mode === "relay-crash") {
  const inner = createRecordingEventLog(
    config.logFile === undefined ? {} : { file: config.logFile },
  );
  let appends = 0;
  const eventLog: Pick<EventLog, "append"> = {
    async append(events) {
      const results = await inner.append(events);
      appends++;
      // The worst moment: the log has the events, the outbox does not know.
      if (appends >= (config.crashAfterAppends ?? 1)) process.kill(process.pid, "SIGKILL");
      return results;
    },
  };
  createOutboxRelay({
    database,
    schema: config.schema,
    eventLog,
    batchSize: config.batchSize ?? 5,
  }).start();
}

if (config.mode === "relay-hold") {
  const relay = createOutboxRelay({
    database,
    schema: config.schema,
    eventLog: createRecordingEventLog(),
  });
  relay.start();
  const check = setInterval(() => {
    if (!relay.active) return;
    clearInterval(check);
    say({ active: true } satisfies ChildLine);
  }, 10);
}
