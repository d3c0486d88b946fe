/**
 * @trellis/eventlog: the append-only event log and signal bus of Trellis
 * (port + JetStream and in-process adapters). Named re-exports only.
 */

export {
  decodeToken,
  encodeToken,
} from "./address.js";
export { changedOrAborted } from "./async-queue.js";
export {
  createEventLog,
  createSignalBus,
  type EventLogConfig,
  type InProcessEventLogConfig,
  type JetStreamEventLogConfig,
} from "./create-event-log.js";
export { DEFAULT_EVENT_WINDOW } from "./defaults.js";
export {
  type AppendOptions,
  type AppendResult,
  type ConsumedEvent,
  type Cursor,
  type DurableConsumerOptions,
  type EventFilter,
  type EventLog,
  encodedBodies,
  type LoggedEvent,
  MAX_EVENT_BYTES,
  MAX_READ_LIMIT,
  NO_SESSION,
  type ReadQuery,
  type ReceivedSignal,
  type Signal,
  type SignalBus,
  type SignalSubscribeOptions,
  type SubscribeQuery,
} from "./event-log.js";
export type { ArchiveRead, EventArchive } from "./in-process/event-archive.js";
export {
  type EventHistory,
  InProcessEventLog,
  type InProcessEventLogOptions,
  type OpenInProcessEventLogOptions,
} from "./in-process/in-process-event-log.js";
export {
  InProcessSignalBus,
  type InProcessSignalBusOptions,
} from "./in-process/in-process-signal-bus.js";
export {
  type ConsumerPositionStore,
  MemoryConsumerPositionStore,
} from "./in-process/journal.js";
export {
  type ConnectNatsOptions,
  connectNats,
  type NatsSecurity,
  natsSecurityFromEnv,
  natsSecurityVariables,
  type StreamOptions,
} from "./jetstream/connection.js";
export {
  JetStreamEventLog,
  type JetStreamEventLogOptions,
} from "./jetstream/jetstream-event-log.js";
export {
  JetStreamSignalBus,
  type JetStreamSignalBusOptions,
} from "./jetstream/jetstream-signal-bus.js";
export { formatTraceparent, parseTraceparent } from "./trace.js";
