import { appendFileSync, existsSync, readFileSync } from "node:fs";
import { clone, fromBinary, toBinary } from "@bufbuild/protobuf";
import { type Event, EventSchema } from "@trellis/contracts/core";
import type {
  AppendResult,
  ConsumedEvent,
  EventLog,
  LoggedEvent,
  ReadQuery,
} from "@trellis/eventlog";

/** Options of {@link createRecordingEventLog}. */
export interface RecordingEventLogOptions {
  /**
   * Persist every stored event to this file (one JSON line each, written
   * synchronously before `append` resolves) and load it at creation: the log
   * then outlives a process killed with SIGKILL, like a real log server.
   */
  file?: string;
}

/** A {@link RecordingEventLog}'s counters, for assertions about behaviour the port hides. */
export interface RecordingEventLogStats {
  /** Events stored (not counting duplicates). */
  stored: number;
  /** Appends of an id already stored (answered `duplicate: true`). */
  duplicates: number;
}

/** The test double: an {@link EventLog} that keeps everything in memory. */
export interface RecordingEventLog extends EventLog {
  readonly stats: RecordingEventLogStats;
}

/** The error a double raises when an append breaks the per-resource sequence rule. */
export class SequenceConflictError extends Error {
  readonly reason = "conflict";
}

/**
 * A minimal EventLog for storage's tests, written against the port only. It
 * keeps the port's append rules — an id is stored once (a repeat answers
 * `duplicate: true` with the original position), per resource `sequence` is
 * 1, 2, 3, … (0 = assign the next; any other value must be exactly the next,
 * else a `conflict`), `previous_event_id` filled when empty — and answers
 * `read`. Live subscriptions and durable consumers are out of scope.
 *
 * Test support only (not exported from the package index); the in-process
 * EventLog from @trellis/eventlog can replace it in the contract suite.
 */
export function createRecordingEventLog(options: RecordingEventLogOptions = {}): RecordingEventLog {
  const entries: LoggedEvent[] = [];
  const byId = new Map<string, LoggedEvent>();
  const tails = new Map<string, { sequence: bigint; id: string }>();
  const stats: RecordingEventLogStats = { stored: 0, duplicates: 0 };

  const store = (event: Event, position: bigint) => {
    const entry = { event, position };
    entries.push(entry);
    byId.set(event.id, entry);
    const resource = event.resource;
    tails.set(`${resource?.object}\u0000${resource?.id}`, {
      sequence: event.sequence,
      id: event.id,
    });
    stats.stored++;
  };

  if (options.file !== undefined && existsSync(options.file)) {
    for (const line of readFileSync(options.file, "utf8").split("\n")) {
      // A line cut short by a crash was never acknowledged: skip it.
      let parsed: { position: string; body: string } | undefined;
      try {
        parsed = JSON.parse(line) as { position: string; body: string };
      } catch {
        continue;
      }
      store(fromBinary(EventSchema, Buffer.from(parsed.body, "base64")), BigInt(parsed.position));
    }
  }

  return {
    stats,
    async append(events) {
      const results: AppendResult[] = [];
      for (const input of events) {
        const existing = byId.get(input.id);
        if (existing !== undefined) {
          stats.duplicates++;
          results.push({
            position: existing.position,
            duplicate: true,
            sequence: existing.event.sequence,
          });
          continue;
        }
        const event = clone(EventSchema, input);
        const key = `${event.resource?.object}\u0000${event.resource?.id}`;
        const tail = tails.get(key);
        const next = (tail?.sequence ?? 0n) + 1n;
        if (event.sequence === 0n) event.sequence = next;
        else if (event.sequence !== next) {
          throw new SequenceConflictError(
            `sequence conflict on ${key.replace("\u0000", "/")}: got ${event.sequence}, expected ${next}`,
          );
        }
        if (event.previousEventId === "" && tail !== undefined) event.previousEventId = tail.id;
        const position = BigInt(entries.length + 1);
        if (options.file !== undefined) {
          const body = Buffer.from(toBinary(EventSchema, event)).toString("base64");
          appendFileSync(options.file, `${JSON.stringify({ position: String(position), body })}\n`);
        }
        store(event, position);
        results.push({ position, duplicate: false, sequence: event.sequence });
      }
      return results;
    },
    async read(query: ReadQuery) {
      const { filter, after, limit = 1000 } = query;
      let start = 0;
      if (after !== undefined) {
        const position =
          "afterPosition" in after
            ? after.afterPosition
            : (byId.get(after.afterEventId)?.position ?? 0n);
        start = entries.findIndex((e) => e.position > position);
        if (start < 0) return [];
      }
      return entries
        .slice(start)
        .filter(
          ({ event }) =>
            event.workspaceId === filter.workspaceId &&
            (filter.sessionId === undefined || event.sessionId === filter.sessionId) &&
            (filter.resource === undefined ||
              (event.resource?.object === filter.resource.object &&
                event.resource?.id === filter.resource.id)),
        )
        .slice(0, limit);
    },
    last(): Promise<LoggedEvent | undefined> {
      throw new Error("last is not supported by the recording test double");
    },
    subscribe(): AsyncIterable<LoggedEvent> {
      throw new Error("subscribe is not supported by the recording test double");
    },
    consume(): AsyncIterable<ConsumedEvent> {
      throw new Error("consume is not supported by the recording test double");
    },
    async ping() {},
    async close() {},
  };
}
