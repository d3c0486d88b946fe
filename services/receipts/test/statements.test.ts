// What the receipts consumer costs the database: every SQL statement it sends
// to PGlite (BEGIN and COMMIT included) is counted while tasks complete, once
// turn by turn (as a chat session produces them: the submit transaction's
// events, then the finish transaction's) and once as a burst, as the only
// consumer (embedded mode) and as one of several replicas. The receipts must
// come out complete and chained either way.
//
// Before batching (one transaction per event, head row locked per receipt)
// this was 14 statements per task in both scenarios; batched, 6 (exclusive)
// and 7 (replicas); as one statement without a transaction, 2.
import type { PGlite } from "@electric-sql/pglite";
import type { Event } from "@trellis/contracts/core";
import { createEventLog, type EventLog } from "@trellis/eventlog";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ReceiptConsumer, startReceiptConsumer } from "../src/consumer.js";
import { everyAgentKnown, keyRingOf, newKey } from "../src/testing/receipt-helpers.js";
import { openReceiptsPGlite } from "../src/testing/receipts-database.js";
import { quietLogger, testProcessor } from "../src/testing/test-processor.js";
import { taskEvents } from "./support.js";

/**
 * Counts the statements sent through a PGlite instance: each `query` or
 * `exec` call (storage sends one statement per call, by either protocol), and
 * BEGIN and COMMIT for each transaction. Not counted: storage preparing a
 * statement text for reuse (`PREPARE`, once per text and instance).
 */
const preparing = (text: string) =>
  /^(prepare |deallocate |savepoint trellis_prepare|rollback to savepoint trellis_prepare)/.test(
    text,
  );

function countStatements(pglite: PGlite): { count(): number; raw: PGlite["query"] } {
  let n = 0;
  const query = pglite.query.bind(pglite);
  const exec = pglite.exec.bind(pglite);
  const transaction = pglite.transaction.bind(pglite);
  pglite.query = ((...args: Parameters<PGlite["query"]>) => {
    n++;
    return query(...args);
  }) as PGlite["query"];
  pglite.exec = ((...args: Parameters<PGlite["exec"]>) => {
    if (!preparing(args[0])) n++;
    return exec(...args);
  }) as PGlite["exec"];
  pglite.transaction = ((callback: Parameters<PGlite["transaction"]>[0]) => {
    n += 2; // BEGIN, COMMIT (or ROLLBACK)
    return transaction((tx) =>
      callback(
        new Proxy(tx, {
          get(target, property, receiver) {
            if (property === "query") {
              return (...args: Parameters<typeof tx.query>) => {
                n++;
                return target.query(...args);
              };
            }
            if (property === "exec") {
              return (...args: Parameters<typeof tx.exec>) => {
                if (!preparing(args[0])) n++;
                return target.exec(...args);
              };
            }
            return Reflect.get(target, property, receiver);
          },
        }),
      ),
    );
  }) as PGlite["transaction"];
  return { count: () => n, raw: query };
}

describe.each([
  { mode: "exclusive (embedded)", exclusive: true, perTurn: 2 },
  { mode: "one of several replicas", exclusive: false, perTurn: 2 },
])("receipts consumer, $mode: SQL statements per task (PGlite)", ({ exclusive, perTurn }) => {
  let close: () => Promise<void>;
  let eventLog: EventLog;
  let consumer: ReceiptConsumer;
  let counter: ReturnType<typeof countStatements>;
  const keys = keyRingOf(newKey("key_statements"));
  const directory = everyAgentKnown();

  beforeAll(async () => {
    const opened = await openReceiptsPGlite();
    close = opened.close;
    eventLog = await createEventLog({ kind: "in-process" });
    const processor = testProcessor({ store: opened.store, keys, directory, exclusive });
    counter = countStatements(opened.pglite);
    consumer = startReceiptConsumer({ eventLog, processor, logger: quietLogger() });
  });

  afterAll(async () => {
    await consumer?.stop();
    await eventLog?.close();
    await close?.();
  });

  /** Uncounted: how many receipts and recorded events there are. */
  async function progress(workspace: string): Promise<{ receipts: number; events: number }> {
    const result = await counter.raw<{ receipts: number; events: number }>(
      `select (select count(*)::int from receipts.receipts where workspace_id = $1) as receipts,
              (select count(*)::int from receipts.task_events where workspace_id = $1) as events`,
      [workspace],
    );
    return result.rows[0] as { receipts: number; events: number };
  }

  async function chainIsGapFree(workspace: string, expected: number): Promise<void> {
    const rows = (
      await counter.raw<{ i: number; receipt_hash: string; previous_receipt_hash: string | null }>(
        `select chain_index::int as i, receipt_hash, previous_receipt_hash
           from receipts.receipts where workspace_id = $1 order by chain_index`,
        [workspace],
      )
    ).rows;
    expect(rows).toHaveLength(expected);
    rows.forEach((row, k) => {
      expect(row.i).toBe(k + 1);
      expect(row.previous_receipt_hash).toBe(k === 0 ? null : rows[k - 1]?.receipt_hash);
    });
  }

  const TURNS = 30;
  const BURST = 200;

  it("turn by turn: submit events, then the finish events with the terminal one", async () => {
    const workspace = "ws_turns";
    const before = counter.count();
    let events = 0;
    for (let i = 0; i < TURNS; i++) {
      const all = taskEvents({ taskId: `task_turn_${i}`, workspaceId: workspace });
      const submit = all.slice(0, -1);
      const finish = all.slice(-1);
      events += all.length;
      await eventLog.append(submit);
      await eventually(async () => (await progress(workspace)).events >= events - 1, {
        timeoutMs: 10_000,
        what: "the submit events recorded",
      });
      await eventLog.append(finish);
      await eventually(async () => (await progress(workspace)).receipts >= i + 1, {
        timeoutMs: 10_000,
        what: `receipt ${i + 1}`,
      });
    }
    const perTask = (counter.count() - before) / TURNS;
    console.log(`receipts consumer, turn by turn: ${perTask.toFixed(2)} statements per task`);
    await chainIsGapFree(workspace, TURNS);
    // Submit: one insert. Finish: one statement (events, receipt, head,
    // outbox rows; no BEGIN/COMMIT), the task's facts from memory (as one of
    // several replicas, checked by that statement). The first turn also reads
    // the chain head.
    expect(perTask).toBeLessThanOrEqual(perTurn + 1 / TURNS);
  });

  it("turn by turn, the finish a few ms after the submit: one statement per task", async () => {
    const workspace = "ws_turns_close";
    const before = counter.count();
    for (let i = 0; i < TURNS; i++) {
      const all = taskEvents({ taskId: `task_close_${i}`, workspaceId: workspace });
      await eventLog.append(all.slice(0, -1));
      await new Promise((resolve) => setTimeout(resolve, 5));
      await eventLog.append(all.slice(-1));
      await eventually(async () => (await progress(workspace)).receipts >= i + 1, {
        timeoutMs: 10_000,
        what: `receipt ${i + 1}`,
      });
    }
    const perTask = (counter.count() - before) / TURNS;
    console.log(
      `receipts consumer, turn by turn (close): ${perTask.toFixed(2)} statements per task`,
    );
    await chainIsGapFree(workspace, TURNS);
    // The submit's events wait (unacknowledged) for the finish's: one statement.
    expect(perTask).toBeLessThanOrEqual(1 + 1 / TURNS);
  });

  it("back to back, the next turn not waiting for the receipt: turns share statements", async () => {
    // As at one chat turn in flight: the client sends its next turn once it
    // has its answer, and receipts are behind the answer. A batch that issues
    // waits (issueLingerMs) for the next turns, whose events share it.
    const workspace = "ws_back_to_back";
    const before = counter.count();
    for (let i = 0; i < TURNS; i++) {
      const all = taskEvents({ taskId: `task_b2b_${i}`, workspaceId: workspace });
      await eventLog.append(all.slice(0, -1));
      await new Promise((resolve) => setTimeout(resolve, 3));
      await eventLog.append(all.slice(-1));
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    await eventually(async () => (await progress(workspace)).receipts >= TURNS, {
      timeoutMs: 20_000,
      what: `${TURNS} receipts`,
    });
    const perTask = (counter.count() - before) / TURNS;
    console.log(`receipts consumer, back to back: ${perTask.toFixed(2)} statements per task`);
    // Gap-free and linked across the batches the turns were grouped into.
    await chainIsGapFree(workspace, TURNS);
    // One statement per turn without the wait; with it, fewer.
    expect(perTask).toBeLessThanOrEqual(0.75);
  });

  it("burst: many tasks' events at once", async () => {
    const workspace = "ws_burst";
    const all: Event[] = [];
    for (let i = 0; i < BURST; i++) {
      all.push(...taskEvents({ taskId: `task_burst_${i}`, workspaceId: workspace }));
    }
    const before = counter.count();
    const started = performance.now();
    await eventLog.append(all);
    await eventually(async () => (await progress(workspace)).receipts >= BURST, {
      timeoutMs: 120_000,
      intervalMs: 50,
      what: `${BURST} receipts`,
    });
    const ms = performance.now() - started;
    const perTask = (counter.count() - before) / BURST;
    console.log(
      `receipts consumer, burst of ${BURST}: ${perTask.toFixed(2)} statements per task, ${Math.round((BURST * 1000) / ms)} tasks/s`,
    );
    await chainIsGapFree(workspace, BURST);
    expect(perTask).toBeLessThan(0.5);
  });
});
