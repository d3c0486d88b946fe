/**
 * Contract-suite targets: how each backend builds a fresh log + signal bus
 * for one test, and what "another replica" and "a restart" mean for it.
 */
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import { testNatsUrl, uniqueSuffix } from "@trellis/testkit";
import type { EventLogContractTarget, EventLogHandles } from "../src/event-log.contract.js";
import { InProcessEventLog } from "../src/in-process/in-process-event-log.js";
import { InProcessSignalBus } from "../src/in-process/in-process-signal-bus.js";
import { MemoryConsumerPositionStore } from "../src/in-process/journal.js";
import { connectNats, type StreamOptions } from "../src/jetstream/connection.js";
import { JetStreamEventLog } from "../src/jetstream/jetstream-event-log.js";
import { JetStreamSignalBus } from "../src/jetstream/jetstream-signal-bus.js";

/** In-process: replicas share the instances; a restart hydrates a new log from the old one's events. */
export async function inProcessTarget(): Promise<EventLogContractTarget> {
  const positions = new MemoryConsumerPositionStore();
  let log = new InProcessEventLog({ consumerPositions: positions });
  let signals = new InProcessSignalBus();
  const target: EventLogContractTarget = {
    get log() {
      return log;
    },
    get signals() {
      return signals;
    },
    async replica() {
      return { log, signals };
    },
    async restart() {
      // Embedded mode reloads the outbox table; here the old log's events stand in for it.
      const history = log.snapshot();
      await log.close();
      await signals.close();
      log = await InProcessEventLog.open({ history, consumerPositions: positions });
      signals = new InProcessSignalBus();
      return { log, signals };
    },
    async dispose() {
      await log.close();
      await signals.close();
    },
  };
  return target;
}

/** Options for {@link jetStreamTarget}. */
export interface JetStreamTargetOptions extends StreamOptions {
  servers?: string;
}

/**
 * JetStream on the shared test server: a unique subject prefix (and so unique
 * streams) per test; replicas and restarts are new connections; streams are
 * deleted on dispose.
 */
export function jetStreamTarget(
  options: JetStreamTargetOptions = {},
): () => Promise<EventLogContractTarget> {
  return async () => {
    const servers = options.servers ?? testNatsUrl;
    const prefix = `t_${uniqueSuffix()}`;
    const connections: NatsConnection[] = [];
    const openHandles = async (): Promise<EventLogHandles> => {
      const connection = await connectNats({ servers, name: "eventlog-contract" });
      connections.push(connection);
      const log = await JetStreamEventLog.open({
        ...options,
        connection,
        prefix,
        storage: options.storage ?? "file",
      });
      const signals = await JetStreamSignalBus.open({ ...options, connection, prefix });
      return { log, signals };
    };
    let current = await openHandles();
    const streams = [
      (current.log as JetStreamEventLog).streamName,
      (current.signals as JetStreamSignalBus).streamName,
    ];
    const target: EventLogContractTarget = {
      get log() {
        return current.log;
      },
      get signals() {
        return current.signals;
      },
      replica: openHandles,
      async restart() {
        await current.log.close();
        await current.signals.close();
        const old = connections.shift();
        await old?.close();
        current = await openHandles();
        return current;
      },
      async dispose() {
        await current.log.close();
        await current.signals.close();
        const admin = connections[0] ?? (await connectNats({ servers }));
        const jsm = await jetstreamManager(admin);
        for (const stream of streams) await jsm.streams.delete(stream).catch(() => false);
        await Promise.all(connections.map((nc) => nc.close()));
        if (!connections.includes(admin)) await admin.close();
      },
    };
    return target;
  };
}
