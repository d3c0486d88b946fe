/**
 * A durable, explicit-ack pull consumer as an async iterator, shared by the
 * event log's `consume` and the signal bus' `subscribe`.
 */
import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  type JetStreamClient,
  type JetStreamManager,
  type JsMsg,
} from "@nats-io/jetstream";
import { type NatsConnection, nanos } from "@nats-io/transport-node";
import { AsyncQueue } from "../async-queue.js";
import { natsError } from "./connection.js";

/** One delivery of a durable consumer. */
export interface DurableDelivery {
  msg: JsMsg;
  /**
   * Ack; resolves once the server has it: one round trip (a flush) after
   * the acks of the same tick, not a reply per ack. The server applies an
   * ack it has at once; should it crash first, the message comes back after
   * the ack wait (at-least-once, as for any consumer that dies unacked).
   */
  ack(): Promise<void>;
  nak(delayMs?: number): Promise<void>;
}

/** Parameters of {@link consumeDurable}. */
export interface ConsumeDurableParams {
  /** The connection `js` runs on (acks are confirmed by flushing it). */
  nc: NatsConnection;
  js: JetStreamClient;
  jsm: JetStreamManager;
  stream: string;
  durable: string;
  filterSubject: string;
  ackWaitMs: number;
  /**
   * Messages pulled ahead per request. Small for competing, low-volume
   * consumers: whatever is pulled but unacked when an iterator closes waits
   * for the ack wait before another replica gets it.
   */
  maxMessages: number;
  /** In-progress acks of held messages this often (see `DurableConsumerOptions`). */
  keepAliveMs?: number;
  signal?: AbortSignal;
  /** Registry of live iterators, so the owner can end them all on close. */
  live: Set<{ end(): void }>;
}

/**
 * Create-or-update the durable, then pull from it.
 *
 * Messages arrive through a callback into our own queue rather than the
 * client's iterator, so closing is prompt and nothing is yielded after it.
 *
 * Unacked messages are *not* nak'ed on close: nats-server 2.9 keeps a closed
 * client's pending pull request until it expires and sends a nak'ed message
 * into it, where it is lost until the ack wait and (measured on 2.9.10) also
 * makes the consumer deliver another message twice. Left alone, unacked
 * messages simply come back after the ack wait, which is JetStream's contract.
 */
export async function* consumeDurable(
  params: ConsumeDurableParams,
): AsyncGenerator<DurableDelivery, void, undefined> {
  const { js, jsm, stream, durable } = params;
  const confirm = flushAfterTick(params.nc);
  let messages: ConsumerMessages;
  const queue = new AsyncQueue<JsMsg>();
  let stopping = false;
  // Pulled and neither acked nor naked: what a keep-alive reports as in progress.
  const held = new Set<JsMsg>();
  const keepAlive =
    params.keepAliveMs !== undefined && params.keepAliveMs > 0
      ? setInterval(() => {
          for (const msg of held) msg.working();
        }, params.keepAliveMs)
      : undefined;
  keepAlive?.unref();
  try {
    // On nats-server 2.9 adding an existing durable updates its mutable fields
    // (filter, ack wait): the latest definition wins.
    await jsm.consumers.add(stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: params.filterSubject,
      ack_wait: nanos(params.ackWaitMs),
      max_deliver: -1,
    });
    const consumer = await js.consumers.get(stream, durable);
    messages = await consumer.consume({
      max_messages: params.maxMessages,
      callback: (m) => {
        // After close, leave it to the ack wait (see above).
        if (stopping) return;
        if (keepAlive) held.add(m);
        queue.push(m);
      },
    });
  } catch (err) {
    clearInterval(keepAlive);
    throw natsError(err);
  }
  void messages.closed().then((err) => queue.end(err ? natsError(err) : undefined));
  const handle = { end: () => queue.close() };
  params.live.add(handle);
  const onAbort = () => queue.close();
  params.signal?.addEventListener("abort", onAbort, { once: true });
  if (params.signal?.aborted) queue.close();
  try {
    for await (const msg of queue) {
      yield {
        msg,
        ack: async () => {
          held.delete(msg);
          try {
            msg.ack();
            await confirm();
          } catch (err) {
            throw natsError(err);
          }
        },
        nak: async (delayMs?: number) => {
          held.delete(msg);
          msg.nak(delayMs);
        },
      };
    }
  } finally {
    stopping = true;
    // What this iterator still holds is left to the ack wait (see above).
    clearInterval(keepAlive);
    held.clear();
    params.live.delete(handle);
    params.signal?.removeEventListener("abort", onAbort);
    queue.close();
    await messages.close().catch(() => {});
  }
}

/**
 * A flush shared by every caller of the same tick, sent after all of them:
 * what each awaits is a round trip to the server begun after its own
 * writes (the server reads a connection in order). A reply per ack
 * (`ackAck`) cost a request each — an inbox, a timer, an Error object —
 * and a reply message from the server (six per chat turn for receipts).
 */
function flushAfterTick(nc: NatsConnection): () => Promise<void> {
  let next: Promise<void> | undefined;
  return () => {
    next ??= Promise.resolve().then(() => {
      next = undefined;
      return nc.flush();
    });
    return next;
  };
}
