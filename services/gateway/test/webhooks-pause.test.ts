// The webhooks consumer runs only while a subscription exists (issue 20):
// with none it stops pulling after the event that found none, and a
// subscription made later starts it again where the durable stood, so the
// events made after the subscription are all queued. And the dispatcher's
// waits lose no wake-up: a delivery queued, or a stop, while a round's query
// runs ends the wait after it. A fake durable log and store.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { type Event, EventSchema } from "@trellis/contracts/core";
import type { ConsumedEvent, EventLog } from "@trellis/eventlog";
import { createLogger } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { afterEach, describe, expect, it } from "vitest";
import { loadWebhookConfig } from "../src/webhooks/config.js";
import { WebhookDispatcher } from "../src/webhooks/dispatcher.js";
import type { NewDelivery, SubscriptionRow, WebhookStore } from "../src/webhooks/store.js";

/** A durable consumer's log: one place in the stream, kept across iterators. */
function fakeDurableLog() {
  const stream: Event[] = [];
  let next = 0;
  let open = 0;
  let acks = 0;
  let pushed: (() => void) | undefined;
  const log = {
    async *consume(options: { signal?: AbortSignal }): AsyncGenerator<ConsumedEvent> {
      open++;
      try {
        while (!options.signal?.aborted) {
          const event = stream[next];
          if (event === undefined) {
            await new Promise<void>((resolve) => {
              pushed = resolve;
              options.signal?.addEventListener("abort", () => resolve(), { once: true });
            });
            continue;
          }
          next++;
          yield {
            event,
            position: BigInt(next),
            deliveryCount: 1,
            ack: async () => {
              acks++;
            },
            nak: async () => {},
          };
        }
      } finally {
        open--;
      }
    },
  };
  return {
    eventLog: log as unknown as EventLog,
    push(event: Event) {
      stream.push(event);
      pushed?.();
    },
    get open() {
      return open;
    },
    get acks() {
      return acks;
    },
    get delivered() {
      return next;
    },
  };
}

function taskEvent(at: Date): Event {
  return create(EventSchema, {
    id: `evt_${Math.random().toString(36).slice(2)}`,
    kind: "task.completed",
    workspaceId: "default",
    createdAt: timestampFromDate(at),
  });
}

describe("webhooks dispatcher: pausing and waking", () => {
  let dispatcher: WebhookDispatcher | undefined;
  afterEach(async () => {
    await dispatcher?.stop();
  });

  it("stops consuming, then misses no event made after a later subscription", async () => {
    const log = fakeDurableLog();
    const subscriptions: SubscriptionRow[] = [];
    const queued: NewDelivery[] = [];
    const store = {
      active: async () => [...subscriptions],
      enqueue: async (deliveries: readonly NewDelivery[]) => {
        queued.push(...deliveries);
        return deliveries.length;
      },
      claimDue: async () => [],
      finish: async () => {},
    } as unknown as WebhookStore;
    dispatcher = new WebhookDispatcher({
      store,
      eventLog: log.eventLog,
      logger: createLogger({ service: "test", level: "error" }),
      config: loadWebhookConfig({}),
    });
    dispatcher.start();
    await eventually(() => log.open === 1, { what: "the consumer opens once at start" });

    // An event with no subscription anywhere: acked, then the consumer stops.
    log.push(taskEvent(new Date(Date.now() - 60_000)));
    await eventually(() => log.acks === 1 && log.open === 0, { what: "consumer stopped" });

    // Events while stopped are not pulled.
    const beforeSubscription = taskEvent(new Date(Date.now() - 30_000));
    log.push(beforeSubscription);
    const subscribedAt = new Date(Date.now() - 20_000);
    const afterSubscription = taskEvent(new Date(Date.now() - 10_000));
    log.push(afterSubscription);
    await new Promise((r) => setTimeout(r, 50));
    expect(log.delivered).toBe(1);
    expect(log.acks).toBe(1);

    // A subscription made here: the consumer starts where the durable stood.
    subscriptions.push({
      id: "whk_1",
      workspace_id: "default",
      url: "http://127.0.0.1:1/hook",
      secret: "whsec_x",
      event_types: "task.*",
      description: "",
      created_by: "test",
      created_at: subscribedAt,
      deleted_at: null,
    });
    dispatcher.invalidate();
    await eventually(() => log.acks === 3, { what: "the events made while stopped" });
    expect(log.open).toBe(1);
    // Only the event made after the subscription is queued.
    expect(queued.map((d) => d.eventId)).toEqual([afterSubscription.id]);

    // And it keeps consuming while the subscription exists.
    const later = taskEvent(new Date());
    log.push(later);
    await eventually(() => queued.length === 2, { what: "a later event queued" });
    expect(log.open).toBe(1);
  });

  it("loses no wake-up that comes while a round's query runs, stop included", async () => {
    const log = fakeDurableLog();
    const rounds: ((claimed: []) => void)[] = [];
    const subscription: SubscriptionRow = {
      id: "whk_1",
      workspace_id: "default",
      url: "http://127.0.0.1:1/hook",
      secret: "whsec_x",
      event_types: "*",
      description: "",
      created_by: "test",
      created_at: new Date(Date.now() - 60_000),
      deleted_at: null,
    };
    const store = {
      active: async () => [subscription],
      enqueue: async (deliveries: readonly NewDelivery[]) => deliveries.length,
      // Each round's query answers only when the test says so.
      claimDue: () => new Promise((resolve) => rounds.push(resolve)),
      finish: async () => {},
    } as unknown as WebhookStore;
    // Idle waits of 30 s: a lost wake-up would show as a 30 s stall.
    const config = loadWebhookConfig({ TRELLIS_WEBHOOK_POLL: "30s" });
    dispatcher = new WebhookDispatcher({
      store,
      eventLog: log.eventLog,
      logger: createLogger({ service: "test", level: "error" }),
      config,
    });
    dispatcher.start();
    await eventually(() => rounds.length === 1, { what: "the first delivery round" });

    // A delivery queued while the round's query runs wakes the next round.
    expect(await dispatcher.handleEvent(taskEvent(new Date()))).toBe(1);
    rounds[0]?.([]);
    await eventually(() => rounds.length === 2, {
      what: "a second round at once",
      timeoutMs: 5_000,
    });

    // A stop while the query runs ends the wait that follows it at once.
    const started = Date.now();
    const stopped = dispatcher.stop();
    rounds[1]?.([]);
    await stopped;
    expect(Date.now() - started).toBeLessThan(5_000);
    dispatcher = undefined;
  });
});
