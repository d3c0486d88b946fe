/**
 * Child process of the publisher contract's crash test (run with
 * `node --import tsx`; configured by the JSON in TRELLIS_PUBLISHER_CRASH,
 * see {@link PublisherCrashConfig}). It publishes the journal to JetStream
 * and SIGKILLs itself inside its first batch, right after the log took
 * `crashAfterEvents` of the batch's events: the worst moment, with part of
 * the batch in the log and the publisher's position not moved.
 */
import type { EventLog } from "@trellis/eventlog";
import { connectNats, JetStreamEventLog } from "@trellis/eventlog";
import { createDatabase, type DatabaseConfig } from "../create-database.js";
import { createPublisher } from "../journal/publisher.js";

/** What the parent asks the child to do. */
export interface PublisherCrashConfig {
  database: DatabaseConfig;
  schema: string;
  /** The JetStream log: server and subject prefix (the parent's log reads the same stream). */
  nats: { servers: string; prefix: string; storage: "file" | "memory" };
  crashAfterEvents: number;
}

const config = JSON.parse(process.env.TRELLIS_PUBLISHER_CRASH ?? "{}") as PublisherCrashConfig;
const database = await createDatabase(config.database);
const connection = await connectNats({ servers: config.nats.servers, name: "publisher-crash" });
const inner = await JetStreamEventLog.open({
  connection,
  prefix: config.nats.prefix,
  storage: config.nats.storage,
});
const log: Pick<EventLog, "append"> = {
  async append(events) {
    await inner.append(events.slice(0, config.crashAfterEvents));
    process.kill(process.pid, "SIGKILL");
    return new Promise(() => {});
  },
};
await createPublisher({
  database,
  schema: config.schema,
  name: "events",
  log,
  isEvent: (record) => !record.kind.startsWith("tasks.step."),
});
