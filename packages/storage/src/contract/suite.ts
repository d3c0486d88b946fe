/**
 * What the storage contract's parts (contract/*.contract.ts) share: the
 * backend under test and the suite's handles, set up by
 * describeStorageContract (storage.contract.ts).
 */
import type { EventLog } from "@trellis/eventlog";
import type { DatabaseConfig } from "../create-database.js";
import type { Database } from "../database.js";
import type { DeadLetter } from "../outbox/dead-letter.js";
import type { OutboxRelay } from "../outbox/outbox-relay.js";

/** One backend under test: a database several handles ("replicas") can open. */
export interface StorageContractTarget {
  /** A new Database on the same underlying database each call. */
  open(): Promise<Database>;
  /**
   * How a child process reaches the same database. Given only where a
   * process can be killed without taking the database with it (a server);
   * the crash tests are skipped otherwise.
   */
  childConfig?: DatabaseConfig;
  /** Drops / closes everything the target created. */
  teardown(): Promise<void>;
}

/** Options of {@link describeStorageContract}. */
export interface StorageContractOptions {
  /** The event log the relay publishes to (default: the recording double). */
  createEventLog?: () => EventLog | Promise<EventLog>;
}

/** Options of startRelay beyond the log and the schema. */
export interface RelayExtra {
  pollIntervalMs?: number;
  batchSize?: number;
  onError?: (e: unknown) => void;
  logRebuiltFromOutbox?: boolean;
  listen?: boolean;
  retryDelayMs?: number;
  onDeadLetter?: (dead: DeadLetter) => void;
}

/** One backend's suite: its handles (valid once its beforeAll ran) and helpers. */
export interface StorageSuite {
  readonly name: string;
  /** The suite's first handle on the target. */
  readonly database: Database;
  readonly target: StorageContractTarget;
  newEventLog(): Promise<EventLog>;
  /** Starts a relay (stopped after the suite) on `on` (default: database). */
  startRelay(
    eventLog: Pick<EventLog, "append">,
    schema: string,
    extra?: RelayExtra,
    on?: Database,
  ): OutboxRelay;
  /** A fresh schema with the outbox migrated in. */
  outboxSchema(): Promise<string>;
}
