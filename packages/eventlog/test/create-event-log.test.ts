import { jetstreamManager } from "@nats-io/jetstream";
import { testNatsUrl, uniqueSuffix } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import { makeEvent } from "../src/event-log.contract.js";
import {
  createEventLog,
  createSignalBus,
  InProcessEventLog,
  JetStreamEventLog,
  MemoryConsumerPositionStore,
} from "../src/index.js";
import { connectNats } from "../src/jetstream/connection.js";

describe("createEventLog", () => {
  it("builds an in-process log from streamed history (embedded restart)", async () => {
    const positions = new MemoryConsumerPositionStore();
    const first = new InProcessEventLog({ consumerPositions: positions });
    await first.append([
      makeEvent({ workspaceId: "ws", resourceId: "r" }),
      makeEvent({ workspaceId: "ws", resourceId: "r" }),
    ]);
    async function* outbox() {
      yield* first.snapshot();
    }
    const log = await createEventLog({
      kind: "in-process",
      history: outbox(),
      consumerPositions: positions,
    });
    const [third] = await log.append([makeEvent({ workspaceId: "ws", resourceId: "r" })]);
    expect(third).toMatchObject({ position: 3n, sequence: 3n, duplicate: false });
    const signals = await createSignalBus({ kind: "in-process" });
    expect(await signals.deliver({ signalId: "s", payload: 1 })).toEqual({ duplicate: false });
    await log.close();
    await signals.close();
    await expect(log.ping()).rejects.toMatchObject({ reason: "service_unavailable" });
  });

  it("builds a JetStream log that owns its connection", async () => {
    const prefix = `t_${uniqueSuffix()}`;
    const log = await createEventLog({ kind: "jetstream", servers: testNatsUrl, prefix });
    expect(log).toBeInstanceOf(JetStreamEventLog);
    await log.ping();
    await log.close();
    const nc = await connectNats({ servers: testNatsUrl });
    const jsm = await jetstreamManager(nc);
    await jsm.streams.delete((log as JetStreamEventLog).streamName);
    await nc.close();
  });
});
