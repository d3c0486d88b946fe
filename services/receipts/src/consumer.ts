/**
 * The receipts service's durable consumer: every event of every workspace
 * (`{ workspaceId: "*" }`), handled one at a time by the
 * {@link ReceiptProcessor}, acknowledged only after what it wrote committed.
 *
 * A restart resumes after the last acknowledged event (the event log keeps
 * the position: JetStream's durable consumer, or the embedded outbox), and
 * what was handled but not acknowledged comes back: recording and issuing
 * are idempotent, so it is handled again without effect.
 *
 * A failure (the database restarting) is retried in place a few times so
 * events of a task keep their order; after that the event is handed back
 * with a delay and the consumer moves on.
 */
import type { EventLog } from "@trellis/eventlog";
import type { Logger } from "@trellis/runtime";
import type { ReceiptProcessor } from "./processor.js";

/** Name of the durable consumer. */
export const CONSUMER_NAME = "receipts";

/** A running consumer. */
export interface ReceiptConsumer {
  stop(): Promise<void>;
}

const IN_PLACE_RETRIES = [100, 400, 1_600];
const REDELIVER_AFTER_FAILURE_MS = 5_000;

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      "abort",
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

/** Start consuming; resolves once the loop runs. */
export function startReceiptConsumer(options: {
  eventLog: EventLog;
  processor: ReceiptProcessor;
  logger: Logger;
  /** Redelivery delay of an event handed out but not acknowledged. */
  ackWaitMs?: number;
}): ReceiptConsumer {
  const { eventLog, processor, logger } = options;
  const abort = new AbortController();
  const signal = abort.signal;

  const loop = (async () => {
    let backoff = 200;
    while (!signal.aborted) {
      try {
        for await (const item of eventLog.consume({
          name: CONSUMER_NAME,
          filter: { workspaceId: "*" },
          ackWaitMs: options.ackWaitMs ?? 30_000,
          signal,
        })) {
          backoff = 200;
          let attempt = 0;
          for (;;) {
            try {
              const outcome = await processor.handle(item, item.deliveryCount);
              if (outcome.ack) await item.ack();
              else await item.nak(outcome.retryInMs);
              break;
            } catch (error) {
              const delay = IN_PLACE_RETRIES[attempt++];
              if (delay === undefined || signal.aborted) {
                logger.warn("receipts: handling an event failed; it will be redelivered", {
                  event_id: item.event.id,
                  kind: item.event.kind,
                  error: error instanceof Error ? error.message : String(error),
                });
                if (!signal.aborted) await item.nak(REDELIVER_AFTER_FAILURE_MS).catch(() => {});
                break;
              }
              await sleep(delay, signal);
            }
          }
          if (signal.aborted) break;
        }
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
