/**
 * Factories that pick a backend from configuration, for `main.ts`:
 * embedded mode → in-process, production → JetStream.
 */
import type { NatsConnection } from "@nats-io/transport-node";
import type { EventLog, SignalBus } from "./event-log.js";
import {
  InProcessEventLog,
  type OpenInProcessEventLogOptions,
} from "./in-process/in-process-event-log.js";
import {
  InProcessSignalBus,
  type InProcessSignalBusOptions,
} from "./in-process/in-process-signal-bus.js";
import { connectNats, type NatsSecurity, type StreamOptions } from "./jetstream/connection.js";
import { JetStreamEventLog } from "./jetstream/jetstream-event-log.js";
import { JetStreamSignalBus } from "./jetstream/jetstream-signal-bus.js";

/** Embedded mode: in memory, history reloaded from the outbox. */
export interface InProcessEventLogConfig
  extends OpenInProcessEventLogOptions,
    InProcessSignalBusOptions {
  kind: "in-process";
}

/** Production mode: NATS JetStream. */
export interface JetStreamEventLogConfig extends StreamOptions {
  kind: "jetstream";
  /** Servers to connect to; ignored when `connection` is given. */
  servers?: string | string[];
  /** Authentication and TLS of that connection (see `natsSecurityFromEnv`). */
  security?: NatsSecurity;
  /** Reuse an open connection (not closed by the log); else one is opened and owned. */
  connection?: NatsConnection;
  /** Subject prefix (default `"trellis"`). */
  prefix?: string;
  requestTimeoutMs?: number;
  pingTimeoutMs?: number;
}

/** Which event log backend to build. */
export type EventLogConfig = InProcessEventLogConfig | JetStreamEventLogConfig;

async function connectionFor(
  config: JetStreamEventLogConfig,
): Promise<{ nc: NatsConnection; owned: boolean }> {
  if (config.connection) return { nc: config.connection, owned: false };
  return {
    nc: await connectNats({
      servers: config.servers ?? "nats://127.0.0.1:4222",
      ...(config.security ? { security: config.security } : {}),
    }),
    owned: true,
  };
}

/**
 * Build the configured {@link EventLog}.
 *
 * @example
 *   const log = await createEventLog({ kind: "jetstream", servers: env.NATS_URL });
 *   const embedded = await createEventLog({ kind: "in-process", history: outbox.readAll() });
 */
export async function createEventLog(config: EventLogConfig): Promise<EventLog> {
  if (config.kind === "in-process") {
    const { kind: _kind, ...options } = config;
    return InProcessEventLog.open(options);
  }
  const { nc, owned } = await connectionFor(config);
  return JetStreamEventLog.open({ ...config, connection: nc, ownsConnection: owned });
}

/** Build the configured {@link SignalBus} (same configuration as {@link createEventLog}). */
export async function createSignalBus(config: EventLogConfig): Promise<SignalBus> {
  if (config.kind === "in-process") {
    return new InProcessSignalBus(
      config.defaultAckWaitMs === undefined ? {} : { defaultAckWaitMs: config.defaultAckWaitMs },
    );
  }
  const { nc, owned } = await connectionFor(config);
  return JetStreamSignalBus.open({ ...config, connection: nc, ownsConnection: owned });
}
