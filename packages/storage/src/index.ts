/**
 * @trellis/storage: the database layer every Trellis service shares.
 *
 * - `createDatabase()` opens PostgreSQL (production) or PGlite (embedded,
 *   tests) behind one kysely API; `ping()` is the health probe.
 * - `migrate()` brings a service's own schema up to date at start.
 * - The transactional outbox: `createOutboxWriter()` opens units of work
 *   (one transaction: add events, commit, the committed rows go to the
 *   relay), `appendToOutbox()` appends inside a transaction of the caller's,
 *   `createOutboxRelay()` to publish to the event log,
 *   `readOutbox()` to read it back as a durable log, `pruneOutbox()` for
 *   retention; `createOutboxArchive()` / `readOutboxTail()` put an
 *   in-process event log over it (embedded mode).
 *
 * - The journal: `createJournal()` group-commits appends of concurrent
 *   callers (durable before they resolve, gapless positions in commit
 *   order, idempotency keys); `createProjector()` applies it to read models
 *   exactly once, with `waitFor(position)` for read-your-writes;
 *   `createPublisher()` hands its events to the event log;
 *   `pruneJournal()` for retention.
 * - Session leases: `createLeases()` hands out ownership of a stream with a
 *   fence and the stream's head (`expectedPosition`), renews in batches and
 *   reports lost leases.
 *
 * 64-bit integers read as `bigint` on every backend (see `bigint.ts`).
 */
export type { DatabaseConfig } from "./create-database.js";
export { createDatabase } from "./create-database.js";
export type {
  AcquireLockOptions,
  BackgroundErrorHandler,
  Database,
  DatabaseKind,
  Lease,
  PingOptions,
  Unlisten,
} from "./database.js";
export { ping } from "./database.js";
export { DEFAULT_CHECKPOINT_INTERVAL_MS, DEFAULT_CHECKPOINT_WAL_BYTES } from "./defaults.js";
export type { PGliteDatabaseConfig } from "./dialect/pglite/pglite-config.js";
export type { OpenPGliteOptions } from "./dialect/pglite/pglite-database.js";
export { openPGlite } from "./dialect/pglite/pglite-database.js";
export type {
  PGliteMaintenance,
  PGliteMaintenanceOperation,
  PGliteMaintenanceOptions,
} from "./dialect/pglite/pglite-maintenance.js";
export {
  DEFAULT_MAINTENANCE_BUSY_MS,
  DEFAULT_MAINTENANCE_CHECK_MS,
  DEFAULT_VACUUM_MAX_ROWS,
  startPGliteMaintenance,
} from "./dialect/pglite/pglite-maintenance.js";
export type { PostgresDatabaseConfig } from "./dialect/postgres/postgres-config.js";
export type {
  AppendOptions,
  AppendResult,
  Journal,
  JournalEntry,
  JournalOptions,
  JournalStats,
} from "./journal/journal.js";
export { createJournal } from "./journal/journal.js";
export type { JournalRecord, ReadJournalOptions } from "./journal/journal-read.js";
export { journalHead, readJournal } from "./journal/journal-read.js";
export type { PruneJournalOptions, PruneJournalResult } from "./journal/journal-retention.js";
export { pruneJournal } from "./journal/journal-retention.js";
export type {
  JournalDatabase,
  JournalDeadLetterTable,
  JournalProjectionTable,
  JournalRow,
  JournalTable,
} from "./journal/journal-schema.js";
export {
  journalAppendFunctionMigration,
  journalChannel,
  journalDeadLetterMigration,
  journalMigrations,
  journalTables,
} from "./journal/journal-schema.js";
export type { TransactionAppendOptions } from "./journal/journal-unit.js";
export { appendInTransaction } from "./journal/journal-unit.js";
export type { ProjectionStages, ProjectionWrite } from "./journal/projection-writes.js";
export { writesStatement } from "./journal/projection-writes.js";
export type {
  Projector,
  ProjectorDeadLetter,
  ProjectorOptions,
  ProjectorStatus,
  WaitForOptions,
} from "./journal/projector.js";
export {
  createProjector,
  isDeterministicFailure,
  projectorDeadLetterMetric,
  projectorLagMetric,
} from "./journal/projector.js";
export type { ProjectorHealthOptions } from "./journal/projector-health.js";
export { projectorHealth } from "./journal/projector-health.js";
export type {
  PositionedLog,
  Publisher,
  PublisherOptions,
  PublisherStats,
} from "./journal/publisher.js";
export { createPublisher, publisherDeadLetterMetric } from "./journal/publisher.js";
export type { LeaseDatabase, SessionLeaseTable } from "./lease/lease-schema.js";
export { leaseMigrations } from "./lease/lease-schema.js";
export type {
  AcquireResult,
  HeldLease,
  LeaseStats,
  Leases,
  LeasesOptions,
  LostLease,
  LostListener,
} from "./lease/leases.js";
export { createLeases } from "./lease/leases.js";
export type { MigrateOptions, MigrateResult } from "./migrate.js";
export { migrate } from "./migrate.js";
export type { DeadLetter } from "./outbox/dead-letter.js";
export { DEAD_LETTER_KIND } from "./outbox/dead-letter.js";
export type {
  OutboxEntry,
  PruneOutboxOptions,
  ReadOutboxOptions,
  SequenceOptions,
} from "./outbox/outbox.js";
export {
  appendToOutbox,
  appendToOutboxLogged,
  outboxTables,
  pruneOutbox,
  readOutbox,
} from "./outbox/outbox.js";
export { createOutboxArchive, readOutboxTail } from "./outbox/outbox-archive.js";
export type { OutboxRelay, OutboxRelayOptions } from "./outbox/outbox-relay.js";
export { createOutboxRelay } from "./outbox/outbox-relay.js";
export type {
  NewOutboxRow,
  OutboxDatabase,
  OutboxRow,
  OutboxRowUpdate,
  OutboxSequenceRow,
  OutboxSequenceTable,
  OutboxTable,
} from "./outbox/outbox-schema.js";
export { outboxChannel, outboxMigrations } from "./outbox/outbox-schema.js";
export type {
  OutboxFold,
  OutboxFreshFold,
  OutboxHandOver,
  OutboxUnit,
  OutboxWriter,
  OutboxWriterOptions,
} from "./outbox/outbox-writer.js";
export { createOutboxWriter } from "./outbox/outbox-writer.js";
export { assertSchemaName } from "./schema-name.js";
