/**
 * Webhook delivery: a durable consumer of the event log queues a delivery per
 * matching subscription (in the database, id derived from subscription and
 * event, so an event the log hands out twice is queued once); a delivery loop
 * sends what is due, signed, and retries failures with exponential backoff
 * and jitter until `TRELLIS_WEBHOOK_MAX_ATTEMPTS`.
 *
 * The consumer runs only while some subscription exists: with none it stops
 * pulling after the event that found none, and starts again when one is
 * made here (`invalidate`) or another replica's shows up (a poll every
 * `pausedPollMs`). The durable keeps its place meanwhile, so the events
 * that arrived while it was stopped come next: none made after a
 * subscription is lost (deliveries are of events made after the
 * subscription, `created_at`), the older ones are dropped as before. A long
 * pause makes that catch-up long (one ack per event).
 *
 * Several gateway replicas share the work: the log's durable consumer gives
 * each event to one of them, and a delivery is claimed with a lease before it
 * is sent. Delivery is at least once (a replica that dies mid-attempt leaves
 * a lease that expires, then another sends it again with the same
 * `webhook-id`), which receivers deduplicate on.
 */
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import type { Event } from "@trellis/contracts/core";
import type { ConsumedEvent, EventLog } from "@trellis/eventlog";
import { type Logger, sleep } from "@trellis/runtime";
import { eventToHarn } from "../domain/harn-json.js";
import { guardedLookup, resolveAllowed, WEBHOOK_BLOCKED } from "./address-guard.js";
import { retryDelayMs, type WebhookConfig } from "./config.js";
import { signWebhook } from "./signing.js";
import type { DeliveryRow, SubscriptionRow, WebhookStore } from "./store.js";

/** Durable consumer name on the event log. */
export const WEBHOOK_CONSUMER = "gateway-webhooks";

// A subscription made on another replica is seen within this long.
const subscriptionCacheMs = 1_000;
// While no subscription exists the consumer is stopped; a subscription made
// on another replica starts it within this long (one made here at once).
const pausedPollMs = 5_000;

/** Whether an event kind matches a subscription's `event_types`. */
export function matchesEventType(patterns: readonly string[], kind: string): boolean {
  return patterns.some(
    (p) => p === "*" || p === kind || (p.endsWith(".*") && kind.startsWith(p.slice(0, -1))),
  );
}

function timestampMs(event: Event): number {
  const t = event.createdAt;
  return t ? Number(t.seconds) * 1000 + Math.floor(t.nanos / 1e6) : Date.now();
}

/**
 * A wait that `ring()` ends early — also when it rang while nobody waited
 * (the loop was busy with a query), so no wake-up is lost between rounds.
 */
class Bell {
  #rung = false;
  #waiting: AbortController | undefined;

  ring(): void {
    this.#rung = true;
    this.#waiting?.abort();
  }

  /** Waits `ms`, or until rung (now or since the last wait) or `signal` aborts. */
  async wait(ms: number, signal: AbortSignal): Promise<void> {
    if (!this.#rung) {
      const waiting = new AbortController();
      this.#waiting = waiting;
      await sleep(ms, signal, waiting.signal);
      this.#waiting = undefined;
    }
    this.#rung = false;
  }
}

export class WebhookDispatcher {
  private readonly abort = new AbortController();
  private cache: { at: number; subscriptions: SubscriptionRow[] } | undefined;
  /** Ends the delivery loop's idle wait (a delivery was queued here). */
  private readonly deliveries = new Bell();
  /** Ends the stopped consumer's wait for a subscription. */
  private readonly subscribed = new Bell();
  /** The delivery loop's next wait: the poll interval, doubled per empty round while idle. */
  private idleWaitMs = 0;
  private running: Promise<unknown>[] = [];

  constructor(
    private readonly options: {
      store: WebhookStore;
      eventLog: EventLog;
      logger: Logger;
      config: WebhookConfig;
    },
  ) {}

  start(): void {
    this.running = [this.consumeLoop(), this.deliveryLoop()];
  }

  async stop(): Promise<void> {
    // Every wait below also ends on this abort, even one that begins after it.
    this.abort.abort();
    await Promise.allSettled(this.running);
  }

  /** Forget cached subscriptions (one was made or deleted here). */
  invalidate(): void {
    this.cache = undefined;
    this.subscribed.ring();
  }

  /** Waits until some subscription exists (or the dispatcher stops). */
  private async untilSubscribed(): Promise<void> {
    const signal = this.abort.signal;
    while (!signal.aborted) {
      try {
        if ((await this.subscriptions()).length > 0) return;
      } catch (error) {
        this.options.logger.warn("webhooks: reading subscriptions failed", {
          error: error instanceof Error ? error.message : String(error),
        });
      }
      await this.subscribed.wait(pausedPollMs, signal);
    }
  }

  private async subscriptions(): Promise<SubscriptionRow[]> {
    const now = Date.now();
    if (this.cache === undefined || now - this.cache.at > subscriptionCacheMs) {
      this.cache = { at: now, subscriptions: await this.options.store.active() };
    }
    return this.cache.subscriptions;
  }

  /** Queue the deliveries of one event. */
  async handleEvent(event: Event): Promise<number> {
    const subscriptions = (await this.subscriptions()).filter(
      (s) =>
        s.workspace_id === event.workspaceId &&
        matchesEventType(s.event_types.split(" "), event.kind) &&
        // Only what happened after the subscription was made.
        timestampMs(event) >= s.created_at.getTime(),
    );
    if (subscriptions.length === 0) return 0;
    const data = eventToHarn(event);
    const body = JSON.stringify({
      type: event.kind,
      timestamp: new Date(timestampMs(event)).toISOString(),
      data,
    });
    const queued = await this.options.store.enqueue(
      subscriptions.map((s) => ({
        subscriptionId: s.id,
        workspaceId: s.workspace_id,
        eventId: event.id,
        eventType: event.kind,
        body,
      })),
    );
    if (queued > 0) {
      this.idleWaitMs = this.options.config.TRELLIS_WEBHOOK_POLL;
      this.deliveries.ring();
    }
    return queued;
  }

  private async consumeLoop(): Promise<void> {
    const { eventLog, logger } = this.options;
    const signal = this.abort.signal;
    let backoff = 500;
    // The first start opens the durable (so it exists from then on) even
    // without subscriptions; after that it runs only while one exists.
    let first = true;
    while (!signal.aborted) {
      if (!first) await this.untilSubscribed();
      first = false;
      if (signal.aborted) return;
      let unsubscribed = false;
      try {
        for await (const item of eventLog.consume({
          name: WEBHOOK_CONSUMER,
          filter: { workspaceId: "*" },
          ackWaitMs: 30_000,
          signal,
        }) as AsyncIterable<ConsumedEvent>) {
          try {
            await this.handleEvent(item.event);
            await item.ack();
            backoff = 500;
            // No subscription: stop pulling (6 acks per turn for nothing).
            if ((await this.subscriptions()).length === 0) {
              unsubscribed = true;
              break;
            }
          } catch (error) {
            if (signal.aborted) return;
            logger.warn("webhooks: queueing an event failed; it will be redelivered", {
              event_id: item.event.id,
              error: error instanceof Error ? error.message : String(error),
            });
            await item.nak(2_000).catch(() => undefined);
          }
        }
        // Stopped for want of a subscription: wait for one, no backoff.
        if (unsubscribed) continue;
      } catch (error) {
        if (signal.aborted) return;
        logger.warn("webhooks: the event consumer stopped; reopening", {
          error: error instanceof Error ? error.message : String(error),
        });
      }
      await sleep(backoff, signal);
      backoff = Math.min(backoff * 2, 10_000);
    }
  }

  private async deliveryLoop(): Promise<void> {
    const { store, config, logger } = this.options;
    const signal = this.abort.signal;
    const leaseMs = config.TRELLIS_WEBHOOK_TIMEOUT + 5_000;
    // While nothing is due the poll backs off, up to 8 polls but never past
    // the first retry's delay; a delivery queued here wakes it at once.
    const pollMs = config.TRELLIS_WEBHOOK_POLL;
    const idleMaxMs = Math.max(pollMs, Math.min(pollMs * 8, config.TRELLIS_WEBHOOK_RETRY_BASE));
    this.idleWaitMs = pollMs;
    while (!signal.aborted) {
      let claimed: Awaited<ReturnType<WebhookStore["claimDue"]>> = [];
      try {
        claimed = await store.claimDue(config.TRELLIS_WEBHOOK_CONCURRENCY, leaseMs);
        await Promise.all(
          claimed.map(({ delivery, subscription }) => this.attempt(delivery, subscription)),
        );
      } catch (error) {
        if (signal.aborted) return;
        logger.warn("webhooks: delivering failed", {
          error: error instanceof Error ? error.message : String(error),
        });
      }
      if (claimed.length > 0) {
        this.idleWaitMs = pollMs;
        continue;
      }
      const waitMs = this.idleWaitMs;
      this.idleWaitMs = Math.min(idleMaxMs, waitMs * 2);
      await this.deliveries.wait(waitMs, signal);
    }
  }

  /** One attempt of one delivery, and its bookkeeping. */
  private async attempt(delivery: DeliveryRow, subscription: SubscriptionRow): Promise<void> {
    const { store, config, logger } = this.options;
    const attempts = delivery.attempts + 1;
    let status: number | null = null;
    let error = "";
    try {
      status = await this.post(subscription, delivery);
      if (status >= 200 && status < 300) {
        await store.finish(delivery.id, { state: "delivered", status, attempts });
        return;
      }
      error = `the receiver answered ${status}`;
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
    }
    if (attempts >= config.TRELLIS_WEBHOOK_MAX_ATTEMPTS) {
      logger.warn("webhooks: giving up on a delivery", {
        delivery_id: delivery.id,
        subscription_id: subscription.id,
        attempts,
        error,
      });
      await store.finish(delivery.id, { state: "failed", status, error, attempts });
      return;
    }
    const nextAttemptAt = new Date(Date.now() + retryDelayMs(config, attempts));
    await store.finish(delivery.id, { state: "pending", status, error, attempts, nextAttemptAt });
  }

  /** POST a delivery; resolves to the response status. */
  private async post(subscription: SubscriptionRow, delivery: DeliveryRow): Promise<number> {
    const { config } = this.options;
    const allowPrivate = config.TRELLIS_WEBHOOKS_ALLOW_PRIVATE;
    const url = new URL(subscription.url);
    const host = url.hostname.replace(/^\[|\]$/g, "");
    // An IP literal is connected to without a lookup: check it here.
    if (isIP(host) !== 0) await resolveAllowed(host, allowPrivate);
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      "content-type": "application/json",
      "user-agent": "Trellis-Webhooks/1",
      "webhook-id": delivery.id,
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signWebhook(subscription.secret, delivery.id, timestamp, delivery.body),
      "content-length": String(Buffer.byteLength(delivery.body)),
    };
    const send = url.protocol === "https:" ? httpsRequest : httpRequest;
    return new Promise<number>((resolve, reject) => {
      const req = send(url, {
        method: "POST",
        headers,
        lookup: guardedLookup(allowPrivate) as never,
        timeout: config.TRELLIS_WEBHOOK_TIMEOUT,
        signal: this.abort.signal,
      });
      req.on("response", (res) => {
        // Read (and drop) the answer so the connection can be reused.
        res.resume();
        res.on("end", () => resolve(res.statusCode ?? 0));
        res.on("error", reject);
      });
      req.on("timeout", () => req.destroy(new Error("the receiver did not answer in time")));
      req.on("error", (e: NodeJS.ErrnoException) =>
        reject(
          new Error(
            e.code === WEBHOOK_BLOCKED
              ? e.message
              : `could not reach the receiver (${e.code ?? e.message})`,
          ),
        ),
      );
      req.end(delivery.body);
    });
  }
}
