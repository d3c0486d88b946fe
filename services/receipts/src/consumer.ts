/**
 * The receipts service's durable consumer: every event of every workspace
 * (`{ workspaceId: "*" }`), handed to the {@link ReceiptProcessor} in
 * batches — whatever has arrived, up to `batchSize` events, in log order —
 * and acknowledged only after what the batch wrote has committed.
 *
 * While a batch is being handled the next events keep arriving (up to
 * another `batchSize`), so under load each transaction carries many events
 * and when the log is quiet an event is handled as soon as it comes.
 *
 * A restart resumes after the last acknowledged event (the event log keeps
 * the position: JetStream's durable consumer, or the embedded outbox), and
 * what was handed out but not acknowledged comes back: recording and issuing
 * are idempotent, so it is handled again without effect. After a crash that
 * takes the ack wait (default 4 s, `DEFAULT_ACK_WAIT_MS`): while the
 * consumer lives it renews every event it holds (`keepAliveMs`), so the
 * short wait never redelivers what a slow batch is still working on.
 *
 * Events that issue nothing (all but a task's end and a tool confirmation)
 * need not be written at once: a batch made only of them waits up to
 * `lingerMs` (default {@link DEFAULT_LINGER_MS}) for more, unacknowledged,
 * so a turn's events — its submission's, then its end's a few milliseconds
 * later — share one statement instead of one each.
 *
 * Receipts are behind the answer (nothing waits on one synchronously: a
 * client polls for it), so a batch that issues waits too, up to
 * `issueLingerMs` (default {@link DEFAULT_ISSUE_LINGER_MS}) after its first
 * issuing event arrived — group commit: at one turn in flight the next turns'
 * events, which a client sends as soon as it has its answer, share the
 * statement, where each turn used to be a batch of its own. A receipt thus
 * appears up to that long later than its task's end. A full batch, or
 * stopping, ends either wait at once; `issueLingerMs: 0` ends it as soon
 * as an issuing event arrives (the behaviour before).
 *
 * A failure (the database restarting) is retried in place a few times so
 * events of a task keep their order; after that the batch's events are tried
 * one by one (an event the store refuses holds back no other) and what still
 * fails is handed back with a delay while the consumer moves on.
 */
import type { Event } from "@trellis/contracts/core";
import type { ConsumedEvent, EventLog } from "@trellis/eventlog";
import { type Logger, sleep, TrellisError } from "@trellis/runtime";
import {
  DEFAULT_ACK_WAIT_MS,
  DEFAULT_BATCH_SIZE,
  DEFAULT_ISSUE_LINGER_MS,
  DEFAULT_LINGER_MS,
  MAX_LINGER_OPTION_MS,
} from "./config.js";
import { APPROVAL_EVENT_KIND, terminalStatusOf } from "./domain/facts.js";
import type { ReceiptProcessor } from "./processor.js";

/** Name of the durable consumer. */
export const CONSUMER_NAME = "receipts";

/** A running consumer. */
export interface ReceiptConsumer {
  stop(): Promise<void>;
}

const IN_PLACE_RETRIES = [100, 400, 1_600];
const REDELIVER_AFTER_FAILURE_MS = 5_000;

/** Start consuming; resolves once the loop runs. */
export function startReceiptConsumer(options: {
  eventLog: EventLog;
  processor: ReceiptProcessor;
  logger: Logger;
  /** Redelivery delay of an event a dead consumer held (default {@link DEFAULT_ACK_WAIT_MS}). */
  ackWaitMs?: number;
  /** Most events handled in one transaction (default {@link DEFAULT_BATCH_SIZE}). */
  batchSize?: number;
  /**
   * How long a batch of events that issue nothing waits for more (default
   * {@link DEFAULT_LINGER_MS}; 0: never).
   */
  lingerMs?: number;
  /**
   * How long a batch that issues a receipt waits for more events after its
   * first issuing event arrived (default {@link DEFAULT_ISSUE_LINGER_MS};
   * 0: never). A receipt appears up to this much later.
   */
  issueLingerMs?: number;
}): ReceiptConsumer {
  const { eventLog, processor, logger } = options;
  const batchSize = Math.max(1, options.batchSize ?? DEFAULT_BATCH_SIZE);
  const lingerMs = lingerOption("lingerMs", options.lingerMs, DEFAULT_LINGER_MS);
  const issueLingerMs = lingerOption(
    "issueLingerMs",
    options.issueLingerMs,
    DEFAULT_ISSUE_LINGER_MS,
  );
  const ackWaitMs = options.ackWaitMs ?? DEFAULT_ACK_WAIT_MS;
  const abort = new AbortController();
  const signal = abort.signal;

  /**
   * Handle one batch: in place retries; then, so that one event the store
   * keeps refusing cannot hold back the others, each event on its own (one
   * attempt); what still fails is handed back.
   */
  async function handle(batch: ConsumedEvent[], retries = IN_PLACE_RETRIES): Promise<void> {
    let attempt = 0;
    for (;;) {
      try {
        const outcomes = await processor.handleBatch(batch);
        await Promise.all(
          batch.map((item, i) => {
            const outcome = outcomes[i];
            return outcome === undefined || outcome.ack ? item.ack() : item.nak(outcome.retryInMs);
          }),
        );
        return;
      } catch (error) {
        const delay = retries[attempt++];
        if (delay === undefined && batch.length > 1 && !signal.aborted) {
          for (const item of batch) await handle([item], []);
          return;
        }
        if (delay === undefined || signal.aborted) {
          logger.warn("receipts: handling events failed; they will be redelivered", {
            events: batch.length,
            first_event_id: batch[0]?.event.id,
            error: error instanceof Error ? error.message : String(error),
          });
          if (!signal.aborted) {
            await Promise.all(
              batch.map((item) => item.nak(REDELIVER_AFTER_FAILURE_MS).catch(() => {})),
            );
          }
          return;
        }
        await sleep(delay, signal);
      }
    }
  }

  /**
   * One open consumer: a reader moves deliveries into `waiting` (at most a
   * batch ahead) while the handler takes everything waiting as its next batch.
   */
  async function consumeOnce(onDelivery: () => void): Promise<void> {
    const iterator = eventLog
      .consume({
        name: CONSUMER_NAME,
        filter: { workspaceId: "*" },
        ackWaitMs,
        // What this replica holds stays its own while it lives; only a dead
        // replica's events wait out the (short) ack wait.
        keepAliveMs: Math.max(250, Math.floor(ackWaitMs / 3)),
        signal,
      })
      [Symbol.asyncIterator]();
    const waiting: ConsumedEvent[] = [];
    let ended = false;
    let failure: unknown;
    let wakeHandler: (() => void) | undefined;
    let wakeReader: (() => void) | undefined;
    const wake = () => {
      wakeHandler?.();
      wakeReader?.();
    };
    signal.addEventListener("abort", wake, { once: true });

    const reader = (async () => {
      try {
        while (!signal.aborted) {
          while (waiting.length >= batchSize && !signal.aborted) {
            await new Promise<void>((resolve) => {
              wakeReader = resolve;
            });
            wakeReader = undefined;
          }
          if (signal.aborted) break;
          const next = await iterator.next();
          if (next.done) break;
          waiting.push(next.value);
          onDelivery();
          wakeHandler?.();
        }
      } catch (error) {
        failure = error;
      } finally {
        ended = true;
        wakeHandler?.();
      }
    })();

    try {
      for (;;) {
        while (waiting.length === 0 && !ended && !signal.aborted) {
          await new Promise<void>((resolve) => {
            wakeHandler = resolve;
          });
          wakeHandler = undefined;
        }
        if (signal.aborted || waiting.length === 0) break;
        // Let the reader take what has already arrived (events appended
        // together come in one after another) so they share a transaction.
        if (waiting.length < batchSize) await new Promise((resolve) => setImmediate(resolve));
        // Let the rest of the turn, and the next turns, arrive (see the header):
        // up to `lingerMs` while nothing issues, then up to `issueLingerMs`
        // from the first issuing event.
        if (lingerMs > 0 || issueLingerMs > 0) {
          let deadline = performance.now() + lingerMs;
          let issuing = false;
          let scanned = 0;
          // One timer per deadline; a delivery wakes the loop without it.
          let timer: NodeJS.Timeout | undefined;
          let timerFor = Number.NaN;
          for (;;) {
            if (!issuing) {
              while (
                scanned < waiting.length &&
                !issues((waiting[scanned] as ConsumedEvent).event)
              ) {
                scanned++;
              }
              if (scanned < waiting.length) {
                issuing = true;
                deadline = performance.now() + issueLingerMs;
              }
            }
            const left = deadline - performance.now();
            if (waiting.length >= batchSize || left <= 0) break;
            if (ended || signal.aborted) break;
            if (timerFor !== deadline) {
              clearTimeout(timer);
              timer = setTimeout(() => {
                // A timer may fire a fraction of a millisecond early: re-arm then.
                timerFor = Number.NaN;
                wakeHandler?.();
              }, left);
              timerFor = deadline;
            }
            await new Promise<void>((resolve) => {
              wakeHandler = resolve;
            });
            wakeHandler = undefined;
          }
          clearTimeout(timer);
          if (signal.aborted) break;
        }
        const batch = waiting.splice(0, batchSize);
        wakeReader?.();
        await handle(batch);
      }
    } finally {
      signal.removeEventListener("abort", wake);
      // Whatever is still waiting was never handled: unacknowledged, it
      // comes back (at once in process, after the ack wait on JetStream).
      await iterator.return?.().catch(() => {});
      await reader;
    }
    if (failure !== undefined) throw failure;
  }

  const loop = (async () => {
    let backoff = 200;
    while (!signal.aborted) {
      try {
        await consumeOnce(() => {
          backoff = 200;
        });
      } catch (error) {
        if (signal.aborted) break;
        logger.warn("receipts: the event log consumer stopped; reopening", {
          error: error instanceof Error ? error.message : String(error),
          retry_in_ms: backoff,
        });
      }
      if (signal.aborted) break;
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 2, 5_000);
    }
  })();

  return {
    async stop() {
      abort.abort();
      await loop;
    },
  };
}

/** A linger option: a finite number of ms from 0 to {@link MAX_LINGER_OPTION_MS}. */
function lingerOption(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `receipts consumer: ${name} must be a number of milliseconds >= 0, got ${String(value)}`,
      param: name,
    });
  }
  if (value > MAX_LINGER_OPTION_MS) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `receipts consumer: ${name} must be at most ${MAX_LINGER_OPTION_MS} ms, got ${value}`,
      param: name,
    });
  }
  return value;
}

/** Whether handling the event may issue a receipt (a task's end, a tool confirmation). */
function issues(event: Event): boolean {
  return event.kind === APPROVAL_EVENT_KIND || terminalStatusOf(event) !== undefined;
}
