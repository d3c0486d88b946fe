import { fromBinary, toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import { jetstream, jetstreamManager } from "@nats-io/jetstream";
import { headers, type NatsConnection } from "@nats-io/transport-node";
import { EventSchema } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";
import { eventually, ThrowawayNats, testNatsUrl, uniqueSuffix } from "@trellis/testkit";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { describeEventLogContract, makeEvent } from "../src/event-log.contract.js";
import { type LoggedEvent, MAX_EVENT_BYTES } from "../src/event-log.js";
import { connectNats } from "../src/jetstream/connection.js";
import { JetStreamEventLog } from "../src/jetstream/jetstream-event-log.js";
import { jetStreamTarget } from "./targets.js";

describeEventLogContract("JetStreamEventLog", jetStreamTarget());

const ids = (events: readonly LoggedEvent[]) => events.map((e) => e.event.id);

async function reasonOf(promise: Promise<unknown>): Promise<string | undefined> {
  return promise.then(
    () => undefined,
    (e: unknown) => (isTrellisError(e) ? e.reason : String(e)),
  );
}

describe("JetStreamEventLog on the shared server", () => {
  const opened: { nc: NatsConnection; log: JetStreamEventLog }[] = [];
  const open = async (options: { duplicateWindowMs?: number } = {}) => {
    const nc = await connectNats({ servers: testNatsUrl });
    const log = await JetStreamEventLog.open({
      connection: nc,
      prefix: `t_${uniqueSuffix()}`,
      ...options,
    });
    opened.push({ nc, log });
    return { nc, log };
  };
  afterEach(async () => {
    for (const { nc, log } of opened.splice(0)) {
      await log.close();
      const jsm = await jetstreamManager(nc);
      await jsm.streams.delete(log.streamName).catch(() => false);
      await nc.close();
    }
  });

  it("stores the bytes it is given for an event it stores unchanged, else encodes", async () => {
    const { nc, log } = await open();
    const jsm = await jetstreamManager(nc);
    const stored = async (position: bigint | undefined) =>
      (await jsm.streams.getMessage(log.streamName, { seq: Number(position) }))?.data;
    // Sequenced as the outbox does, with bytes that decode to the event but
    // are not protobuf-es's own encoding of it (its kind written twice).
    const first = makeEvent({ workspaceId: "ws_1", resourceId: "task_b", sequence: 1n });
    const kindAgain = new BinaryWriter()
      .tag(EventSchema.field.kind.number, WireType.LengthDelimited)
      .string(first.kind)
      .finish();
    const given = new Uint8Array([...toBinary(EventSchema, first), ...kindAgain]);
    expect(fromBinary(EventSchema, given)).toEqual(first);
    const [a] = await log.append([first], { encoded: new Map([[first, given]]) });
    expect(await stored(a?.position)).toEqual(given);
    // Not stored unchanged (the log assigns the sequence): encoded afresh.
    const second = makeEvent({ workspaceId: "ws_1", resourceId: "task_b" });
    const stale = toBinary(EventSchema, second);
    const [b] = await log.append([second], { encoded: new Map([[second, stale]]) });
    const body = await stored(b?.position);
    expect(body).not.toEqual(stale);
    expect(fromBinary(EventSchema, body as Uint8Array)).toMatchObject({
      id: second.id,
      sequence: 2n,
      previousEventId: first.id,
    });
  });

  it("stores events on readable subjects with msg id and traceparent headers", async () => {
    const { nc, log } = await open();
    const event = makeEvent({
      workspaceId: "ws_1",
      resourceId: "task_1",
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
    });
    const [result] = await log.append([event]);
    const jsm = await jetstreamManager(nc);
    const msg = await jsm.streams.getMessage(log.streamName, { seq: Number(result!.position) });
    expect(msg?.subject).toBe(`${log.prefix}.events.ws_1._.task.task_1`);
    expect(msg?.header.get("Nats-Msg-Id")).toBe(event.id);
    expect(msg?.header.get("traceparent")).toBe(
      "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    );
    // A producer that only sets the header (not the body) still yields a traced event.
    const bare = makeEvent({ workspaceId: "ws_1", resourceId: "task_2", sequence: 1n });
    const h = headers();
    h.set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    await jetstream(nc).publish(
      `${log.prefix}.events.ws_1._.task.task_2`,
      toBinary(EventSchema, bare),
      {
        headers: h,
      },
    );
    const [read] = await log.read({
      filter: { workspaceId: "ws_1", resource: { object: "task", id: "task_2" } },
    });
    expect(read!.event.traceId).toBe("0af7651916cd43dd8448eb211c80319c");
    expect(read!.event.spanId).toBe("b7ad6b7169203331");
  });

  it("refuses an event over MAX_EVENT_BYTES before sending, and takes the resource's next one", async () => {
    const { log } = await open();
    const big = makeEvent({
      workspaceId: "ws_1",
      resourceId: "task_big",
      text: "x".repeat(MAX_EVENT_BYTES),
    });
    expect(await reasonOf(log.append([big]))).toBe("payload_too_large");
    const [next] = await log.append([makeEvent({ workspaceId: "ws_1", resourceId: "task_big" })]);
    expect(next?.sequence).toBe(1n);
  });

  it("recognises an explicit-sequence retry older than the dedupe window", async () => {
    const { log } = await open({ duplicateWindowMs: 200 });
    const ws = `ws_${uniqueSuffix()}`;
    const stored = [1n, 2n, 3n].map((sequence) =>
      makeEvent({ workspaceId: ws, resourceId: "r", sequence }),
    );
    const results = await log.append(stored);
    await new Promise((r) => setTimeout(r, 700));
    // Not the last event: found by scanning the resource's subject.
    const [middle] = await log.append([stored[1]!]);
    expect(middle).toEqual({ position: results[1]!.position, duplicate: true, sequence: 2n });
    // The last event: recognised from the resource head.
    const [last] = await log.append([stored[2]!]);
    expect(last).toEqual({ position: results[2]!.position, duplicate: true, sequence: 3n });
    expect(await log.read({ filter: { workspaceId: ws } })).toHaveLength(3);
  });

  it("refuses to take over a stream name that carries other subjects", async () => {
    const { nc, log } = await open();
    const reason = await reasonOf(
      JetStreamEventLog.open({
        connection: nc,
        prefix: `${log.prefix}x`,
        streamName: log.streamName,
      }),
    );
    expect(reason).toBe("config_invalid");
  });

  it("drops a subscription's consumer when its signal aborts, with the subscriber suspended at a yield", async () => {
    const { nc, log } = await open();
    const ws = `ws_${uniqueSuffix()}`;
    await log.append([makeEvent({ workspaceId: ws, resourceId: "r" })]);
    const jsm = await jetstreamManager(nc);
    const consumers = async () => (await jsm.consumers.list(log.streamName).next()).length;
    const ac = new AbortController();
    const subscription = log.subscribe({ filter: { workspaceId: ws }, signal: ac.signal });
    expect((await subscription.next()).done).toBe(false);
    expect(await consumers()).toBe(1);
    // The subscriber went away (a StreamEvents client that left): the
    // generator is never resumed, only the signal says it is over.
    ac.abort();
    await eventually(async () => (await consumers()) === 0, {
      timeoutMs: 3_000,
      what: "the subscription's consumer deleted",
    });
  });
});

describe("JetStreamEventLog across a nats-server restart", () => {
  let server: ThrowawayNats | undefined;
  afterAll(async () => {
    await server?.dispose();
  });

  it("loses no acknowledged event and keeps subscribers and consumers going", async () => {
    server = await ThrowawayNats.start();
    const nc = await connectNats({ servers: server.url, reconnectTimeWaitMs: 100 });
    const log = await JetStreamEventLog.open({
      connection: nc,
      prefix: "restart",
      requestTimeoutMs: 1500,
    });
    try {
      const ws = "ws_restart";
      const filter = { workspaceId: ws };
      const received: LoggedEvent[] = [];
      const ac = new AbortController();
      const live = (async () => {
        for await (const e of log.subscribe({ filter, signal: ac.signal })) received.push(e);
      })();
      const before = Array.from({ length: 100 }, (_, i) =>
        makeEvent({ workspaceId: ws, resourceId: `r${i % 3}` }),
      );
      for (const event of before) await log.append([event]);
      // A durable consumer acks the first 50 before the restart.
      const consumer = { name: "receipts", filter, ackWaitMs: 2000 };
      let acked = 0;
      for await (const m of log.consume(consumer)) {
        await m.ack();
        if (++acked === 50) break;
      }
      await eventually(() => received.length === 100, { what: "live events before the restart" });

      await server.stop();
      // Health checks fail fast while the server is down.
      await eventually(async () => (await reasonOf(log.ping())) === "service_unavailable", {
        what: "ping to fail",
      });
      const started = Date.now();
      expect(await reasonOf(log.ping())).toBe("service_unavailable");
      expect(Date.now() - started).toBeLessThan(250);
      // An append while down fails as unavailable; its outcome is unknown, so
      // the caller retries it later with the same id.
      const inDoubt = makeEvent({ workspaceId: ws, resourceId: "r0" });
      expect(await reasonOf(log.append([inDoubt]))).toBe("service_unavailable");

      await server.start();
      await eventually(async () => (await reasonOf(log.ping())) === undefined, {
        timeoutMs: 20_000,
        what: "ping after the restart",
      });
      const [retried] = await log.append([inDoubt]);
      expect(retried).toBeDefined();
      const after = Array.from({ length: 100 }, (_, i) =>
        makeEvent({ workspaceId: ws, resourceId: `r${i % 3}` }),
      );
      for (const event of after) await log.append([event]);

      const all = await log.read({ filter, limit: 1000 });
      const expected = [...before, inDoubt, ...after].map((e) => e.id);
      expect(ids(all)).toEqual(expected);
      for (const resource of ["r0", "r1", "r2"]) {
        const seqs = all
          .filter((e) => e.event.resource?.id === resource)
          .map((e) => e.event.sequence);
        expect(seqs).toEqual(seqs.map((_, i) => BigInt(i + 1)));
      }
      // The live subscriber resumed after the restart with no gap and no duplicate.
      await eventually(() => received.length >= expected.length, {
        timeoutMs: 20_000,
        what: "live events after the restart",
      });
      expect(ids(received)).toEqual(expected);
      // The durable consumer resumes after the 50 it acked.
      const rest = new Set<string>();
      for await (const m of log.consume(consumer)) {
        expect(expected.indexOf(m.event.id)).toBeGreaterThanOrEqual(50);
        rest.add(m.event.id);
        await m.ack();
        if (rest.size === expected.length - 50) break;
      }
      expect([...rest].sort()).toEqual(expected.slice(50).sort());
      ac.abort();
      await live;
    } finally {
      await log.close();
      await nc.close();
    }
  });
});
