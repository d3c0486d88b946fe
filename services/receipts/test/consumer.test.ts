// The consumer loop on the in-process event log: events appended together are
// handled together (never more than the batch size), a batch that issues
// nothing waits for the rest of its turn, a batch that issues waits for the
// next turns (group commit) until its linger, a full batch or a stop ends the
// wait, and an event the store keeps refusing holds back no other event of
// its batch. Linger options and TRELLIS_RECEIPT_BATCH_LINGER are validated.
import type { Event } from "@trellis/contracts/core";
import { createEventLog, type EventLog } from "@trellis/eventlog";
import { createLogger, TrellisError } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { DEFAULT_ISSUE_LINGER_MS, loadReceiptsConfig, MAX_ISSUE_LINGER_MS } from "../src/config.js";
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

type ConsumerOptions = Parameters<typeof startReceiptConsumer>[0];

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

  /** A consumer on a fresh in-process log, its processor a fake that fails when `fails` says. */
  async function startConsumer(
    options: Pick<ConsumerOptions, "batchSize" | "lingerMs" | "issueLingerMs"> = {},
    fails: (batch: readonly Delivery[]) => boolean = () => false,
  ) {
    eventLog = await createEventLog({ kind: "in-process" });
    const fake = fakeProcessor(fails);
    consumer = startReceiptConsumer({ eventLog, processor: fake.processor, logger, ...options });
    return { log: eventLog, fake };
  }

  it("handles events appended together in one batch, up to the batch size", async () => {
    const { log, fake } = await startConsumer({ batchSize: 16 });
    const first = events(10);
    await log.append(first);
    await eventually(async () => fake.handled.size === 10, { what: "10 events handled" });
    expect(fake.batches).toEqual([first.map((e) => e.id)]);

    const burst = events(100).map((e) => ({ ...e, id: `${e.id}_burst` }));
    await log.append(burst);
    await eventually(async () => fake.handled.size === 110, { what: "the burst handled" });
    const later = fake.batches.slice(1);
    expect(later.every((b) => b.length <= 16)).toBe(true);
    expect(later.length).toBeLessThanOrEqual(8);
    // In log order, each once.
    expect(later.flat()).toEqual(burst.map((e) => e.id));
  });

  it("lets a batch that issues nothing wait for the rest of the turn", async () => {
    const { log, fake } = await startConsumer({ lingerMs: 2_000 });
    const turn = taskEvents({ taskId: "task_linger" });
    const submit = turn.slice(0, -1);
    const end = turn.slice(-1);
    await log.append(submit);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fake.batches).toEqual([]);
    // The task's end issues a receipt: the wait ends, one batch for the turn.
    await log.append(end);
    await eventually(async () => fake.handled.size === turn.length, { what: "the turn handled" });
    expect(fake.batches).toEqual([turn.map((e) => e.id)]);

    // Events that issue nothing and nothing after them: handled when the wait ends.
    const alone = taskEvents({ taskId: "task_alone" }).slice(0, 2);
    await log.append(alone);
    await eventually(async () => fake.handled.size === turn.length + alone.length, {
      timeoutMs: 10_000,
      what: "the lone events handled after the wait",
    });
    expect(fake.batches.slice(1)).toEqual([alone.map((e) => e.id)]);
  });

  it("lets a batch that issues wait for the next turns, then handles them together", async () => {
    const { log, fake } = await startConsumer({ issueLingerMs: 1_500 });
    const first = taskEvents({ taskId: "task_group_1" });
    const second = taskEvents({ taskId: "task_group_2" });
    // A whole turn, its end included: the batch issues, yet waits.
    await log.append(first);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(fake.batches).toEqual([]);
    // The next turn arrives within the wait (its end does not extend it).
    await log.append(second);
    const both = [...first, ...second].map((e) => e.id);
    await eventually(async () => fake.handled.size === both.length, {
      timeoutMs: 10_000,
      what: "both turns handled",
    });
    expect(fake.batches).toEqual([both]);
  });

  it("ends a batch's wait when the batch is full", async () => {
    const { log, fake } = await startConsumer({
      batchSize: 8,
      lingerMs: 60_000,
      issueLingerMs: 60_000,
    });
    const turn = taskEvents({ taskId: "task_full" });
    const all = [...turn, ...events(16 - turn.length)];
    await log.append(all);
    // A minute of linger otherwise: full batches go at once.
    await eventually(async () => fake.handled.size === 16, {
      timeoutMs: 20_000,
      what: "two full batches handled",
    });
    expect(fake.batches).toEqual([all.slice(0, 8), all.slice(8)].map((b) => b.map((e) => e.id)));
  });

  it("ends a batch's wait when it stops, leaving the batch to be redelivered", async () => {
    eventLog = await createEventLog({ kind: "in-process" });
    const fake = fakeProcessor(() => false);
    const lingering = startReceiptConsumer({
      eventLog,
      processor: fake.processor,
      logger,
      issueLingerMs: 60_000,
    });
    const turn = taskEvents({ taskId: "task_stop" });
    await eventLog.append(turn);
    await new Promise((resolve) => setTimeout(resolve, 100));
    // Resolves without waiting out the minute (the test's timeout is one).
    await lingering.stop();
    expect(fake.batches).toEqual([]);
    // Nothing was acknowledged: the next consumer gets the turn.
    consumer = startReceiptConsumer({
      eventLog,
      processor: fake.processor,
      logger,
      issueLingerMs: 0,
    });
    await eventually(async () => fake.handled.size === turn.length, {
      timeoutMs: 10_000,
      what: "the turn redelivered and handled",
    });
    expect(fake.batches.flat()).toEqual(turn.map((e) => e.id));
  });

  it("refuses a linger that is not a number of milliseconds from 0 to a minute", async () => {
    eventLog = await createEventLog({ kind: "in-process" });
    const fake = fakeProcessor(() => false);
    for (const [name, value] of [
      ["issueLingerMs", -1],
      ["issueLingerMs", Number.NaN],
      ["issueLingerMs", Number.POSITIVE_INFINITY],
      ["issueLingerMs", 60_001],
      ["issueLingerMs", "20" as unknown as number],
      ["lingerMs", -5],
      ["lingerMs", Number.NaN],
    ] as const) {
      let thrown: unknown;
      try {
        startReceiptConsumer({ eventLog, processor: fake.processor, logger, [name]: value });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, `${name}: ${String(value)}`).toBeInstanceOf(TrellisError);
      expect((thrown as TrellisError).reason).toBe("config_invalid");
      expect((thrown as TrellisError).message).toContain(name);
    }
  });

  it("reads TRELLIS_RECEIPT_BATCH_LINGER as a duration up to 1s", () => {
    expect(loadReceiptsConfig({}).batchLingerMs).toBe(DEFAULT_ISSUE_LINGER_MS);
    expect(loadReceiptsConfig({ TRELLIS_RECEIPT_BATCH_LINGER: "0" }).batchLingerMs).toBe(0);
    expect(loadReceiptsConfig({ TRELLIS_RECEIPT_BATCH_LINGER: "25ms" }).batchLingerMs).toBe(25);
    expect(loadReceiptsConfig({ TRELLIS_RECEIPT_BATCH_LINGER: "1s" }).batchLingerMs).toBe(
      MAX_ISSUE_LINGER_MS,
    );
    for (const raw of ["soon", "-1", "-1ms", "1001ms", "2s", "10 apples"]) {
      let thrown: unknown;
      try {
        loadReceiptsConfig({ TRELLIS_RECEIPT_BATCH_LINGER: raw });
      } catch (error) {
        thrown = error;
      }
      expect(thrown, raw).toBeInstanceOf(TrellisError);
      expect((thrown as TrellisError).reason).toBe("config_invalid");
      expect((thrown as TrellisError).message).toContain("TRELLIS_RECEIPT_BATCH_LINGER");
    }
  });

  it("lets a refused event hold back no other event of its batch", async () => {
    const all = events(6);
    const poison = (all[2] as Event).id;
    const { log, fake } = await startConsumer({}, (batch) =>
      batch.some((d) => d.event.id === poison),
    );
    await log.append(all);
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
