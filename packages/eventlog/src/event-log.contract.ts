/**
 * The contract every {@link EventLog} / {@link SignalBus} implementation must
 * pass (the langgraphjs checkpoint-validation pattern): a backend adds a
 * target factory and a two-line spec file calling
 * {@link describeEventLogContract}.
 *
 * @example
 *   // packages/eventlog/test/in-process.test.ts
 *   import { describeEventLogContract } from "../src/event-log.contract.js";
 *   describeEventLogContract("InProcessEventLog", inProcessTarget);
 */
import { create } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";
import { afterEach, describe, expect, it } from "vitest";
import type {
  AppendResult,
  EventFilter,
  EventLog,
  LoggedEvent,
  ReceivedSignal,
  SignalBus,
} from "./event-log.js";
import { NO_SESSION } from "./event-log.js";

/** A log and a signal bus, as one process would hold them. */
export interface EventLogHandles {
  log: EventLog;
  signals: SignalBus;
}

/**
 * What a backend hands the suite, fresh for every test (its own streams,
 * its own memory). The suite never closes handles itself: `dispose` does.
 */
export interface EventLogContractTarget extends EventLogHandles {
  /**
   * Another live handle on the same log and bus, like a second replica
   * (JetStream: a second connection; in-process: the same instances).
   */
  replica(): Promise<EventLogHandles>;
  /**
   * Close the current handles and open new ones over the same durable state,
   * as after a process restart (in-process: hydrate from the old log's events
   * and reuse the consumer position store). Later calls to `replica`/`restart`
   * and `dispose` apply to the new handles.
   */
  restart(): Promise<EventLogHandles>;
  /** Close everything and delete what the target created. */
  dispose(): Promise<void>;
}

let counter = 0;

/** A unique id for this suite run (ids may contain characters illegal in subjects). */
function uid(kind: string): string {
  counter += 1;
  return `${kind}_${Date.now().toString(36)}_${counter}`;
}

/** Build a test event (sequence 0 unless given). */
export function makeEvent(init: {
  id?: string;
  workspaceId: string;
  sessionId?: string;
  object?: string;
  resourceId: string;
  sequence?: bigint;
  traceId?: string;
  spanId?: string;
  text?: string;
}): Event {
  return create(EventSchema, {
    id: init.id ?? uid("evt"),
    kind: "task.progress",
    workspaceId: init.workspaceId,
    sessionId: init.sessionId ?? "",
    resource: { object: init.object ?? "task", id: init.resourceId },
    sequence: init.sequence ?? 0n,
    traceId: init.traceId ?? "",
    spanId: init.spanId ?? "",
    payload: { kind: { case: "data", value: { note: init.text ?? "hello" } } },
  });
}

/** Take `count` items from an async iterable (then stop it), failing after `timeoutMs`. */
async function take<T>(
  iterable: AsyncIterable<T>,
  count: number,
  timeoutMs = 20_000,
): Promise<T[]> {
  const out: T[] = [];
  if (count === 0) return out;
  const iterator = iterable[Symbol.asyncIterator]();
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`timed out after ${out.length}/${count} items`)),
      timeoutMs,
    );
  });
  try {
    while (out.length < count) {
      const next = await Promise.race([iterator.next(), timeout]);
      if (next.done) throw new Error(`iterator ended after ${out.length}/${count} items`);
      out.push(next.value);
    }
    return out;
  } finally {
    clearTimeout(timer);
    await iterator.return?.();
  }
}

/** Expect `promise` to reject with a TrellisError of `reason`. */
async function expectReason(promise: Promise<unknown>, reason: string): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, `expected a TrellisError "${reason}"`).toBeDefined();
  expect(isTrellisError(error) ? error.reason : String(error)).toBe(reason);
}

const ids = (events: readonly LoggedEvent[]) => events.map((e) => e.event.id);

/**
 * Register the EventLog / SignalBus contract suite for one backend.
 *
 * Covers: batch append of 10,000 events read back in order; a mid-stream
 * subscriber (no gap, no duplicate while appends continue); retried appends
 * stored once; per-resource sequences gap-free under concurrent appenders;
 * sequence conflicts; deterministic cursors (position and event id);
 * `cursor_expired`; durable consumers resuming across close, reopen and
 * restart; signals deliver / get / dedupe / competing subscribe.
 */
export function describeEventLogContract(
  name: string,
  factory: () => Promise<EventLogContractTarget>,
): void {
  describe(`EventLog contract: ${name}`, () => {
    let target: EventLogContractTarget | undefined;
    const open = async () => {
      target = await factory();
      return target;
    };
    afterEach(async () => {
      await target?.dispose();
      target = undefined;
    });

    it("finds a filter's latest event, the start of a 'from now' reader", async () => {
      const { log } = await open();
      const ws = uid("ws");
      expect(await log.last({ workspaceId: ws, sessionId: "ses_a" })).toBeUndefined();
      const events = ["ses_a", "ses_b", "ses_a", "ses_b"].map((sessionId, i) =>
        makeEvent({ workspaceId: ws, sessionId, resourceId: `r${i}` }),
      );
      await log.append(events);
      const last = await log.last({ workspaceId: ws, sessionId: "ses_a" });
      expect(last?.event.id).toBe(events[2]!.id);
      expect((await log.last({ workspaceId: ws }))?.event.id).toBe(events[3]!.id);
      // Reading after it gives only what comes later.
      const later = makeEvent({ workspaceId: ws, sessionId: "ses_a", resourceId: "r9" });
      await log.append([later]);
      const read = await log.read({
        filter: { workspaceId: ws, sessionId: "ses_a" },
        after: { afterPosition: last!.position },
      });
      expect(ids(read)).toEqual([later.id]);
    });

    it("appends 10,000 events in batches and reads them back in order", async () => {
      const { log } = await open();
      const ws = uid("ws");
      const resources = ["r1", "r2", "r3", "r4", "r5"];
      const appended: Event[] = [];
      for (let batch = 0; batch < 10; batch++) {
        const events = Array.from({ length: 1000 }, (_, i) =>
          makeEvent({
            workspaceId: ws,
            resourceId: resources[i % resources.length]!,
            text: `b${batch}i${i}`,
          }),
        );
        const results = await log.append(events);
        expect(results).toHaveLength(1000);
        expect(results.every((r) => !r.duplicate)).toBe(true);
        appended.push(...events);
      }
      // Page through with position cursors.
      const all: LoggedEvent[] = [];
      for (;;) {
        const last = all.at(-1);
        const page = await log.read({
          filter: { workspaceId: ws },
          limit: 3000,
          ...(last ? { after: { afterPosition: last.position } } : {}),
        });
        if (page.length === 0) break;
        all.push(...page);
      }
      expect(all).toHaveLength(10_000);
      for (let i = 1; i < all.length; i++)
        expect(all[i]!.position > all[i - 1]!.position).toBe(true);
      for (const resource of resources) {
        const mine = all.filter((e) => e.event.resource?.id === resource);
        // Per resource: exactly the input order, sequences 1..n, chained.
        expect(ids(mine)).toEqual(
          appended.filter((e) => e.resource?.id === resource).map((e) => e.id),
        );
        mine.forEach((e, i) => {
          expect(e.event.sequence).toBe(BigInt(i + 1));
          expect(e.event.previousEventId).toBe(i === 0 ? "" : mine[i - 1]!.event.id);
        });
      }
      // One read of the maximum size gives the same answer.
      const once = await log.read({ filter: { workspaceId: ws }, limit: 10_000 });
      expect(ids(once)).toEqual(ids(all));
    });

    for (const cursorKind of ["position", "event id"] as const) {
      it(`a subscriber starting mid-stream (${cursorKind} cursor) sees no gap and no duplicate while appends continue`, async () => {
        const { log } = await open();
        const ws = uid("ws");
        const filter: EventFilter = { workspaceId: ws };
        const first = await log.append(
          Array.from({ length: 200 }, (_, i) =>
            makeEvent({ workspaceId: ws, resourceId: `r${i % 3}` }),
          ),
        );
        const cursorResult = first[99]!;
        const history = await log.read({ filter, limit: 200 });
        const after =
          cursorKind === "position"
            ? { afterPosition: cursorResult.position }
            : { afterEventId: history[99]!.event.id };
        // Appends keep going while the subscription starts and catches up.
        const background = (async () => {
          for (let batch = 0; batch < 30; batch++) {
            await log.append(
              Array.from({ length: 10 }, (_, i) =>
                makeEvent({ workspaceId: ws, resourceId: `r${i % 4}` }),
              ),
            );
            await new Promise((r) => setTimeout(r, 1));
          }
        })();
        const received = take(log.subscribe({ filter, after }), 100 + 300);
        const [got] = await Promise.all([received, background]);
        const expected = await log.read({ filter, after, limit: 10_000 });
        expect(expected).toHaveLength(400);
        expect(ids(got)).toEqual(ids(expected));
        expect(new Set(ids(got)).size).toBe(400);
        expect(got.map((e) => e.position)).toEqual(expected.map((e) => e.position));
      });
    }

    it("keeps a retried append with the same id once", async () => {
      const { log } = await open();
      const ws = uid("ws");
      const event = makeEvent({ workspaceId: ws, resourceId: "r1" });
      const [first] = await log.append([event]);
      const [again] = await log.append([event]);
      expect(first!.duplicate).toBe(false);
      expect(again).toEqual({ ...first!, duplicate: true });
      // Concurrent retries of a fresh event: one stored, all agree on it.
      const other = makeEvent({ workspaceId: ws, resourceId: "r1" });
      const results = (await Promise.all([1, 2, 3, 4].map(() => log.append([other])))).map(
        (r) => r[0]!,
      );
      expect(results.filter((r) => !r.duplicate)).toHaveLength(1);
      expect(new Set(results.map((r) => r.position)).size).toBe(1);
      expect(results.every((r) => r.sequence === 2n)).toBe(true);
      // A duplicate inside a batch is reported in place.
      const third = makeEvent({ workspaceId: ws, resourceId: "r1" });
      const batch = await log.append([event, third, other]);
      expect(batch.map((r) => r.duplicate)).toEqual([true, false, true]);
      expect(batch[0]!.position).toBe(first!.position);
      const stored = await log.read({ filter: { workspaceId: ws } });
      expect(ids(stored)).toEqual([event.id, other.id, third.id]);
      expect(stored.map((e) => e.event.sequence)).toEqual([1n, 2n, 3n]);
    });

    it("keeps the per-resource sequence gap-free under concurrent appenders", async () => {
      const target = await open();
      const replica = await target.replica();
      const ws = uid("ws");
      const resource = { object: "task", id: "contended" };
      const appender = (log: EventLog, n: number) => async () => {
        const out: AppendResult[] = [];
        for (let i = 0; i < n; i++) {
          const [r] = await log.append([makeEvent({ workspaceId: ws, resourceId: resource.id })]);
          out.push(r!);
        }
        return out;
      };
      const runs = [
        ...Array.from({ length: 4 }, () => appender(target.log, 25)),
        ...Array.from({ length: 4 }, () => appender(replica.log, 25)),
      ];
      const results = (await Promise.all(runs.map((run) => run()))).flat();
      expect(results).toHaveLength(200);
      expect(new Set(results.map((r) => r.sequence)).size).toBe(200);
      const stored = await target.log.read({ filter: { workspaceId: ws, resource } });
      expect(stored.map((e) => e.event.sequence)).toEqual(
        Array.from({ length: 200 }, (_, i) => BigInt(i + 1)),
      );
      stored.forEach((e, i) => {
        expect(e.event.previousEventId).toBe(i === 0 ? "" : stored[i - 1]!.event.id);
      });
    });

    it("rejects a wrong explicit sequence with conflict and accepts the right one", async () => {
      const { log } = await open();
      const ws = uid("ws");
      const on = (sequence: bigint, id?: string) =>
        makeEvent({ workspaceId: ws, resourceId: "r1", sequence, ...(id ? { id } : {}) });
      await expectReason(log.append([on(2n)]), "conflict");
      const stored = [on(1n), on(2n), on(3n)];
      const results = await log.append(stored);
      expect(results.map((r) => r.sequence)).toEqual([1n, 2n, 3n]);
      await expectReason(log.append([on(5n)]), "conflict");
      await expectReason(log.append([on(3n)]), "conflict");
      await expectReason(log.append([on(1n)]), "conflict");
      // The relay retrying an event it already published (not the last one): duplicate.
      const [retry] = await log.append([stored[1]!]);
      expect(retry).toEqual({ position: results[1]!.position, duplicate: true, sequence: 2n });
      const [fourth] = await log.append([on(4n)]);
      expect(fourth!.sequence).toBe(4n);
      // A sequence-0 event after explicit ones continues the count.
      const [fifth] = await log.append([on(0n)]);
      expect(fifth!.sequence).toBe(5n);
      const read = await log.read({ filter: { workspaceId: ws } });
      expect(read.map((e) => e.event.sequence)).toEqual([1n, 2n, 3n, 4n, 5n]);
    });

    it("rejects events it cannot address with invalid_request", async () => {
      const { log } = await open();
      const ws = uid("ws");
      await expectReason(
        log.append([makeEvent({ workspaceId: ws, resourceId: "r", id: "" })]),
        "invalid_request",
      );
      await expectReason(
        log.append([makeEvent({ workspaceId: "", resourceId: "r" })]),
        "invalid_request",
      );
      await expectReason(log.read({ filter: { workspaceId: ws }, limit: 0 }), "invalid_request");
    });

    it("reads after a cursor deterministically (position and event id)", async () => {
      const { log } = await open();
      const ws = uid("ws");
      const other = uid("ws");
      await log.append(
        Array.from({ length: 30 }, (_, i) =>
          makeEvent({ workspaceId: i % 2 ? ws : other, resourceId: "r" }),
        ),
      );
      const all = await log.read({ filter: { workspaceId: ws } });
      expect(all).toHaveLength(15);
      const pivot = all[4]!;
      const byPosition = await log.read({
        filter: { workspaceId: ws },
        after: { afterPosition: pivot.position },
      });
      const byId = await log.read({
        filter: { workspaceId: ws },
        after: { afterEventId: pivot.event.id },
      });
      const again = await log.read({
        filter: { workspaceId: ws },
        after: { afterPosition: pivot.position },
      });
      expect(ids(byPosition)).toEqual(ids(all.slice(5)));
      expect(ids(byId)).toEqual(ids(byPosition));
      expect(ids(again)).toEqual(ids(byPosition));
      const limited = await log.read({
        filter: { workspaceId: ws },
        after: { afterEventId: pivot.event.id },
        limit: 3,
      });
      expect(ids(limited)).toEqual(ids(all.slice(5, 8)));
      const end = await log.read({
        filter: { workspaceId: ws },
        after: { afterPosition: all.at(-1)!.position },
      });
      expect(end).toEqual([]);
      const beyond = await log.read({
        filter: { workspaceId: ws },
        after: { afterPosition: 1_000_000n },
      });
      expect(beyond).toEqual([]);
    });

    it("fails an unknown event-id cursor with cursor_expired", async () => {
      const { log } = await open();
      const ws = uid("ws");
      const [mine] = await log.append([makeEvent({ workspaceId: ws, resourceId: "r" })]);
      const elsewhere = makeEvent({ workspaceId: uid("ws"), resourceId: "r" });
      await log.append([elsewhere]);
      expect(mine!.duplicate).toBe(false);
      await expectReason(
        log.read({ filter: { workspaceId: ws }, after: { afterEventId: "evt_nope" } }),
        "cursor_expired",
      );
      // An event outside the filter is no cursor for it either.
      await expectReason(
        log.read({ filter: { workspaceId: ws }, after: { afterEventId: elsewhere.id } }),
        "cursor_expired",
      );
      await expectReason(
        take(
          log.subscribe({ filter: { workspaceId: ws }, after: { afterEventId: "evt_nope" } }),
          1,
        ),
        "cursor_expired",
      );
    });

    it("filters by workspace, session and resource, with ids that are not subject-safe", async () => {
      const { log } = await open();
      const ws = `${uid("ws")}.odd id*>`;
      const events = [
        makeEvent({ workspaceId: ws, sessionId: "ses 1", resourceId: "a.b" }),
        makeEvent({ workspaceId: ws, sessionId: "ses 1", resourceId: "a" }),
        makeEvent({ workspaceId: ws, sessionId: "ses.2", resourceId: "a.b" }),
        makeEvent({ workspaceId: ws, resourceId: "a.b", object: "session" }),
        makeEvent({ workspaceId: `${ws}x`, sessionId: "ses 1", resourceId: "a.b" }),
        makeEvent({ workspaceId: ws, sessionId: "_under", resourceId: "ünïcødé/🙂" }),
      ];
      await log.append(events);
      const read = async (filter: EventFilter) => ids(await log.read({ filter }));
      const [e0, e1, e2, e3, , e5] = events.map((e) => e.id);
      expect(await read({ workspaceId: ws })).toEqual([e0, e1, e2, e3, e5]);
      expect(await read({ workspaceId: ws, sessionId: "ses 1" })).toEqual([e0, e1]);
      expect(await read({ workspaceId: ws, sessionId: NO_SESSION })).toEqual([e3]);
      expect(await read({ workspaceId: ws, resource: { object: "task", id: "a.b" } })).toEqual([
        e0,
        e2,
      ]);
      expect(
        await read({
          workspaceId: ws,
          sessionId: "ses.2",
          resource: { object: "task", id: "a.b" },
        }),
      ).toEqual([e2]);
      expect(
        await read({ workspaceId: ws, resource: { object: "task", id: "ünïcødé/🙂" } }),
      ).toEqual([e5]);
      // The stored event round-trips intact.
      const [stored] = await log.read({
        filter: { workspaceId: ws, resource: { object: "task", id: "ünïcødé/🙂" } },
      });
      expect(stored!.event.sessionId).toBe("_under");
      expect(stored!.event.resource?.id).toBe("ünïcødé/🙂");
    });

    it("round-trips the trace context", async () => {
      const { log } = await open();
      const ws = uid("ws");
      const traced = makeEvent({
        workspaceId: ws,
        resourceId: "r",
        traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
        spanId: "00f067aa0ba902b7",
      });
      await log.append([traced]);
      const [got] = await take(log.subscribe({ filter: { workspaceId: ws } }), 1);
      expect(got!.event.traceId).toBe(traced.traceId);
      expect(got!.event.spanId).toBe(traced.spanId);
    });

    it("resumes a durable consumer where it left off after close, reopen and restart", async () => {
      const target = await open();
      const ws = uid("ws");
      const events = Array.from({ length: 10 }, (_, i) =>
        makeEvent({ workspaceId: ws, resourceId: `r${i % 2}` }),
      );
      await target.log.append(events);
      const acked = new Set(events.slice(0, 5).map((e) => e.id));
      const unacked = events.slice(5).map((e) => e.id);
      // A short ack wait: an iterator that closes leaves its unacked events to
      // come back after it at the latest (the in-process log hands them back at once).
      const options = { name: uid("receipts"), filter: { workspaceId: ws }, ackWaitMs: 1500 };
      // First run: ack five, receive the sixth without acking, stop.
      let n = 0;
      for await (const m of target.log.consume(options)) {
        n += 1;
        if (n <= 5) await m.ack();
        else break;
      }
      // Reopen in the same process: the unacked sixth comes back, nothing acked does.
      const reopened: string[] = [];
      for await (const m of target.log.consume(options)) {
        reopened.push(m.event.id);
        if (m.event.id === unacked[0]) break;
      }
      expect(reopened.filter((id) => acked.has(id))).toEqual([]);
      // Restart: everything not acked (6..10) is delivered, nothing acked (1..5).
      const restarted = await target.restart();
      const seen = new Set<string>();
      for await (const m of restarted.log.consume(options)) {
        expect(acked.has(m.event.id), `acked event ${m.event.id} was redelivered`).toBe(false);
        seen.add(m.event.id);
        await m.ack();
        if (seen.size === unacked.length) break;
      }
      expect([...seen].sort()).toEqual([...unacked].sort());
      // After the restart, live events keep flowing to the same durable, and
      // nothing acked comes back.
      const late = makeEvent({ workspaceId: ws, resourceId: "r0" });
      await restarted.log.append([late]);
      const next = await take(restarted.log.consume(options), 1);
      expect(ids(next)).toEqual([late.id]);
      await next[0]!.ack();
    });

    it("keeps what a live consumer holds past a short ack wait (keepAliveMs), and hands it on once that consumer is gone", async () => {
      const target = await open();
      const ws = uid("ws");
      const events = Array.from({ length: 4 }, () =>
        makeEvent({ workspaceId: ws, resourceId: "r" }),
      );
      await target.log.append(events);
      const options = {
        name: uid("keepalive"),
        filter: { workspaceId: ws },
        ackWaitMs: 1_200,
        keepAliveMs: 300,
      };
      // A holds the first event (and, on JetStream, what it pulled ahead).
      const a = target.log.consume(options)[Symbol.asyncIterator]();
      const held = (await a.next()).value!;
      // B competes for the same durable and acks whatever it gets.
      const stopB = new AbortController();
      const bSeen: { id: string; at: number; count: number }[] = [];
      const b = (async () => {
        for await (const m of target.log.consume({ ...options, signal: stopB.signal })) {
          bSeen.push({ id: m.event.id, at: Date.now(), count: m.deliveryCount });
          await m.ack();
          if (new Set(bSeen.map((s) => s.id)).size === events.length) break;
        }
      })();
      // Well past the ack wait, A is alive and still works on its event: B never gets it.
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      expect(bSeen.map((s) => s.id)).not.toContain(held.event.id);
      // A dies without acking: its event comes back to B within the ack wait.
      const gone = Date.now();
      await a.return?.(undefined);
      // Wait for B to have everything: what A pulled ahead comes back on its
      // own ack-wait clock, a few milliseconds apart from the held event, so
      // stopping B as soon as the held one arrives would race them.
      const deadline = setTimeout(() => stopB.abort(), 8_000);
      await b;
      clearTimeout(deadline);
      const back = bSeen.find((s) => s.id === held.event.id);
      expect(back, "the dead consumer's event came back").toBeDefined();
      expect(back!.at - gone).toBeLessThan(options.ackWaitMs + 2_500);
      // Delivered twice in all: to A, then to B — never again while A held it.
      expect(back!.count).toBe(2);
      expect(new Set(bSeen.map((s) => s.id))).toEqual(new Set(events.map((e) => e.id)));
    });

    it("redelivers a nak'ed event with a higher delivery count, and competes across iterators", async () => {
      const target = await open();
      const ws = uid("ws");
      await target.log.append(
        Array.from({ length: 6 }, () => makeEvent({ workspaceId: ws, resourceId: "r" })),
      );
      const options = { name: uid("worker"), filter: { workspaceId: ws }, ackWaitMs: 5000 };
      const iterator = target.log.consume(options)[Symbol.asyncIterator]();
      const first = (await iterator.next()).value!;
      expect(first.deliveryCount).toBe(1);
      await first.nak();
      const seen: { id: string; count: number }[] = [];
      for (let i = 0; i < 6; i++) {
        const m = (await iterator.next()).value!;
        seen.push({ id: m.event.id, count: m.deliveryCount });
        await m.ack();
      }
      await iterator.return?.();
      expect(new Set(seen.map((s) => s.id)).size).toBe(6);
      expect(seen.find((s) => s.id === first.event.id)?.count).toBe(2);
      // Two iterators on one durable (two replicas) share the work, each event once.
      const replica = await target.replica();
      const more = Array.from({ length: 20 }, () =>
        makeEvent({ workspaceId: ws, resourceId: "r" }),
      );
      const got = new Map<string, number>();
      const ac = new AbortController();
      const run = async (log: EventLog) => {
        for await (const m of log.consume({ ...options, signal: ac.signal })) {
          got.set(m.event.id, (got.get(m.event.id) ?? 0) + 1);
          await m.ack();
          if (got.size === 20) ac.abort();
        }
      };
      const runs = Promise.all([run(target.log), run(replica.log)]);
      await target.log.append(more);
      await runs;
      expect([...got.keys()].sort()).toEqual(more.map((e) => e.id).sort());
      expect([...got.values()].every((c) => c === 1)).toBe(true);
    });

    it("answers ping while open", async () => {
      const { log } = await open();
      await expect(log.ping()).resolves.toBeUndefined();
    });

    describe("SignalBus", () => {
      it("delivers, dedupes by delivery id and gets the first delivery", async () => {
        const { signals } = await open();
        const id = `${uid("task")}.input`;
        expect(await signals.get(id)).toBeUndefined();
        expect(await signals.deliver({ signalId: id, payload: { answer: 42 } })).toEqual({
          duplicate: false,
        });
        expect(await signals.deliver({ signalId: id, payload: { answer: 43 } })).toEqual({
          duplicate: true,
        });
        expect(
          await signals.deliver({ signalId: id, deliveryId: `${id}#2`, payload: "second" }),
        ).toEqual({
          duplicate: false,
        });
        const got = await signals.get(id);
        expect(got?.payload).toEqual({ answer: 42 });
        expect(got?.deliveryId).toBe(id);
        expect(got?.deliveredAt).toBeInstanceOf(Date);
      });

      it("subscribes by prefix, including signals delivered before the call", async () => {
        const { signals } = await open();
        const task = uid("task");
        await signals.deliver({ signalId: `${task}.approve`, payload: true });
        await signals.deliver({ signalId: `${task}x.approve`, payload: "other task" });
        await signals.deliver({ signalId: `${uid("task")}.cancel`, payload: null });
        const subscription = signals.subscribe({ prefix: `${task}.`, group: uid("g") });
        const iterator = subscription[Symbol.asyncIterator]();
        const first = (await iterator.next()).value as ReceivedSignal;
        expect(first.signalId).toBe(`${task}.approve`);
        expect(first.payload).toBe(true);
        await first.ack();
        await signals.deliver({ signalId: `${task}.input`, payload: { text: "hi" } });
        const second = (await iterator.next()).value as ReceivedSignal;
        expect(second.signalId).toBe(`${task}.input`);
        await second.ack();
        await iterator.return?.();
        await expectReason(
          take(signals.subscribe({ prefix: task, group: "g" }), 1),
          "invalid_request",
        );
      });

      it("shares a group between competing subscribers, each signal once", async () => {
        const target = await open();
        const replica = await target.replica();
        const prefix = `${uid("jobs")}.`;
        const group = uid("workers");
        const got = new Map<string, number>();
        const ac = new AbortController();
        const run = async (bus: SignalBus) => {
          for await (const s of bus.subscribe({ prefix, group, signal: ac.signal })) {
            got.set(s.signalId, (got.get(s.signalId) ?? 0) + 1);
            await s.ack();
            if (got.size === 20) ac.abort();
          }
        };
        const runs = Promise.all([run(target.signals), run(replica.signals)]);
        for (let i = 0; i < 20; i++)
          await target.signals.deliver({ signalId: `${prefix}${i}`, payload: i });
        await runs;
        expect(got.size).toBe(20);
        expect([...got.values()].every((c) => c === 1)).toBe(true);
      });
    });
  });
}
