/**
 * The storage contract: one suite every backend of @trellis/storage passes
 * (PGlite in memory, PostgreSQL). A backend supplies a
 * {@link StorageContractTarget} and a two-line spec file:
 *
 * @example
 *   import { describeStorageContract, pgliteTarget } from "@trellis/storage/contract";
 *   describeStorageContract("pglite", pgliteTarget);
 *
 * The event log is reached only through the EventLog port; the recording
 * double is the default and an in-process EventLog can replace it
 * (`options.createEventLog`).
 */
import type { EventLog } from "@trellis/eventlog";
import { createTestDatabase } from "@trellis/testkit";
import { describe } from "vitest";
import { describeCrashContract } from "./contract/crash.contract.js";
import { describeDatabaseContract } from "./contract/database.contract.js";
import { describeOutboxContract } from "./contract/outbox.contract.js";
import { describeRelayContract } from "./contract/relay.contract.js";
import type {
  RelayExtra,
  StorageContractOptions,
  StorageContractTarget,
  StorageSuite,
} from "./contract/suite.js";
import { openContractBackend } from "./contract/support.js";
import { createDatabase, type DatabaseConfig } from "./create-database.js";
import type { Database } from "./database.js";
import { openPGlite } from "./dialect/pglite/pglite-database.js";
import { createOutboxRelay, type OutboxRelay } from "./outbox/outbox-relay.js";
import { outboxMigrations } from "./outbox/outbox-schema.js";
import { createRecordingEventLog } from "./testing/recording-event-log.js";

export type { StorageContractOptions, StorageContractTarget } from "./contract/suite.js";
export { type MemoryMeter, memoryMeter } from "./testing/memory-meter.js";

/** Target: one in-memory PGlite instance shared by every handle (one process). */
export async function pgliteTarget(): Promise<StorageContractTarget> {
  const pglite = await openPGlite();
  const opened: Database[] = [];
  return {
    async open() {
      const database = await createDatabase({ kind: "pglite", pglite });
      opened.push(database);
      return database;
    },
    async teardown() {
      await Promise.all(opened.map((d) => d.close()));
      await pglite.close();
    },
  };
}

/** Target: a fresh database on the test Postgres server, dropped at teardown. */
export async function postgresTarget(): Promise<StorageContractTarget> {
  const testDatabase = await createTestDatabase("storage");
  const config: DatabaseConfig = { kind: "postgres", url: testDatabase.url };
  const opened: Database[] = [];
  return {
    childConfig: config,
    async open() {
      const database = await createDatabase(config);
      opened.push(database);
      return database;
    },
    async teardown() {
      await Promise.all(opened.map((d) => d.close()));
      await testDatabase.drop();
    },
  };
}

/** Registers the storage contract suite for one backend. */
export function describeStorageContract(
  name: string,
  factory: () => Promise<StorageContractTarget>,
  options: StorageContractOptions = {},
): void {
  const newEventLog = async (): Promise<EventLog> =>
    options.createEventLog ? options.createEventLog() : createRecordingEventLog();

  describe(`storage contract: ${name}`, () => {
    const relays: OutboxRelay[] = [];
    const backend = openContractBackend(factory, {
      release: () => Promise.all(relays.map((r) => r.stop())),
    });

    const startRelay = (
      eventLog: Pick<EventLog, "append">,
      schema: string,
      extra: RelayExtra = {},
      on: Database = backend.database,
    ): OutboxRelay => {
      const relay = createOutboxRelay({
        database: on,
        schema,
        eventLog,
        pollIntervalMs: 50,
        retryDelayMs: 10,
        ...extra,
      });
      relays.push(relay);
      relay.start();
      return relay;
    };

    const outboxSchema = (): Promise<string> => backend.freshSchema("st", outboxMigrations);

    const suite: StorageSuite = {
      name,
      get database() {
        return backend.database;
      },
      get target() {
        return backend.target;
      },
      newEventLog,
      startRelay,
      outboxSchema,
    };
    describeDatabaseContract(suite);
    describeOutboxContract(suite);
    describeRelayContract(suite);
    describeCrashContract(suite);
  });
}
