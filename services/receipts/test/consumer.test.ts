// The consumer loop on the in-process event log: events appended together are
// handled together (never more than the batch size), a batch that issues
// nothing waits for the rest of its turn, and an event the store keeps
// refusing holds back no other event of its batch.
import type { Event } from "@trellis/contracts/core";
import { createEventLog, type EventLog } from "@trellis/eventlog";
import { createLogger } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { type ReceiptConsumer, startReceiptConsumer } from "../src/consumer.js";
import type { Delivery, Outcome, ReceiptProcessor } from "../src/processor.js";
import { taskEvents } from "./support.js";

/** Stands in for the processor: records the batches, fails on demand. */
function fakeProcessor(fails: (batch: readonly Delivery[]) => boolean) {
  const batches: string[][] = [];
  const handled = new Set<string>();
  const processor = {
    async handleBatch(batch: readonly Delivery[]): Promise<Outcome[]> {
      batches.push(batch.map((d) => d.event.id));
      if (fails(batch)) throw new Error("the store refused it");
      for (const d of batch) handled.add(d.event.id);
      return batch.map(() => ({ ack: true }));
    },
  };
  return { processor: processor as unknown as ReceiptProcessor, batches, handled };
}

function events(n: number): Event[] {
  const all: Event[] = [];
  for (let i = 0; all.length < n; i++) all.push(...taskEvents({ taskId: `task_c${i}` }));
  return all.slice(0, n);
}

describe("receipts consumer loop", () => {
  let eventLog: EventLog | undefined;
  let consumer: ReceiptConsumer | undefined;
  const logger = createLogger({ service: "test", level: "error" });

  afterEach(async () => {
    await consumer?.stop();
    await eventLog?.close();
  });

  it("handles events appended together in one batch, up to the batch size", async () => {
    eventLog = await createEventLog({ kind: "in-process" });
    const fake = fakeProcessor(() => false);
    consumer = startReceiptConsumer({ eventLog, processor: fake.processor, logger, batchSize: 16 });
    const first = events(10);
    await eventLog.append(first);
    await eventually(async () => fake.handled.size === 10, { what: "10 events handled" });
    expect(fake.batches).toEqual([first.map((e) => e.id)]);

    const burst = events(100).map((e) => ({ ...e, id: `${e.id}_burst` }));
    await eventLog.append(burst);
    await eventually(async () => fake.handled.size === 110, { what: "the burst handled" });
    const later = fake.batches.slice(1);
    expect(later.every((b) => b.length <= 16)).toBe(true);
    expect(later.length).toBeLessThanOrEqual(8);
    // In log order, each once.
    expect(later.flat()).toEqual(burst.map((e) => e.id));
  });

  it("lets a batch that issues nothing wait for the rest of the turn", async () => {
    eventLog = await createEventLog({ kind: "in-process" });
    const fake = fakeProcessor(() => false);
    consumer = startReceiptConsumer({
      eventLog,
      processor: fake.processor,
      logger,
      lingerMs: 2_000,
    });
    const turn = taskEvents({ taskId: "task_linger" });
    const submit = turn.slice(0, -1);
    const end = turn.slice(-1);
    await eventLog.append(submit);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fake.batches).toEqual([]);
    // The task's end issues a receipt: the wait ends, one batch for the turn.
    await eventLog.append(end);
    await eventually(async () => fake.handled.size === turn.length, { what: "the turn handled" });
    expect(fake.batches).toEqual([turn.map((e) => e.id)]);

    // Events that issue nothing and nothing after them: handled when the wait ends.
    const alone = taskEvents({ taskId: "task_alone" }).slice(0, 2);
    await eventLog.append(alone);
    await eventually(async () => fake.handled.size === turn.length + alone.length, {
      timeoutMs: 10_000,
      what: "the lone events handled after the wait",
    });
    expect(fake.batches.slice(1)).toEqual([alone.map((e) => e.id)]);
  });

  it("lets a refused event hold back no other event of its batch", async () => {
    eventLog = await createEventLog({ kind: "in-process" });
    const all = events(6);
    const poison = (all[2] as Event).id;
    const fake = fakeProcessor((batch) => batch.some((d) => d.event.id === poison));
    consumer = startReceiptConsumer({ eventLog, processor: fake.processor, logger });
    await eventLog.append(all);
    await eventually(async () => fake.handled.size === 5, {
      timeoutMs: 15_000,
      what: "every event but the refused one handled",
    });
    expect(fake.handled.has(poison)).toBe(false);
    // Tried as part of the batch (three retries in place), then alone.
    expect(fake.batches.filter((b) => b.length === all.length)).toHaveLength(4);
    expect(fake.batches).toContainEqual([poison]);
  });
});
