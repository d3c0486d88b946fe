/**
 * CPU per task of the receipts consumer at one task in flight, in process on
 * PGlite: a task's submission events, its end 5 ms later (as a chat turn
 * produces them), wait for the batch holding the end, next task. 50 tasks
 * warm up, then `TURNS` (default 300) are measured with
 * `process.cpuUsage()` (the harness's own work — building and appending the
 * events — included, the same in any tree). `EXCLUSIVE=0`: as one of several
 * replicas (facts fenced) instead of embedded mode's only consumer.
 *
 *   npx tsx bench/receipts-turn.ts
 *
 * For A/B, run it in two checkouts alternately (A B B A) and compare ratios.
 */
import type { Event } from "@trellis/contracts/core";
import { createEventLog } from "@trellis/eventlog";
import {
  type Delivery,
  everyAgentKnown,
  keyRingOf,
  newKey,
  openReceiptsPGlite,
  quietLogger,
  startReceiptConsumer,
  taskEvents,
  testProcessor,
} from "@trellis/receipts/testing";

const exclusive = process.env.EXCLUSIVE !== "0";
const { store, close } = await openReceiptsPGlite();
const eventLog = await createEventLog({ kind: "in-process" });
const processor = testProcessor({
  store,
  keys: keyRingOf(newKey("k")),
  directory: everyAgentKnown(),
  exclusive,
});
let waiter: { id: string; resolve: () => void } | undefined;
const orig = processor.handleBatch.bind(processor);
processor.handleBatch = async (batch: readonly Delivery[]) => {
  const out = await orig(batch);
  if (waiter && batch.some((d) => d.event.id === waiter?.id)) waiter.resolve();
  return out;
};
const consumer = startReceiptConsumer({ eventLog, processor, logger: quietLogger() });
async function turn(i: number) {
  const all = taskEvents({ taskId: `task_${i}`, workspaceId: "ws" });
  const last = all.at(-1) as Event;
  const done = new Promise<void>((resolve) => {
    waiter = { id: last.id, resolve };
  });
  await eventLog.append(all.slice(0, -1));
  await new Promise((r) => setTimeout(r, 5));
  await eventLog.append([last]);
  await done;
}
for (let i = 0; i < 50; i++) await turn(i);
const N = Number(process.env.TURNS ?? 300);
const c0 = process.cpuUsage();
for (let i = 50; i < 50 + N; i++) await turn(i);
const c = process.cpuUsage(c0);
console.log(`exclusive=${exclusive} cpu ms/task ${((c.user + c.system) / 1000 / N).toFixed(3)}`);
await consumer.stop();
await eventLog.close();
await close();
