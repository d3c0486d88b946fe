// The durable delivery queue on PGlite (embedded mode's database): an event
// queued twice for a subscription is one delivery; a claimed delivery is not
// handed out again while its lease runs; deleting a subscription cancels what
// it had pending.
import { createDatabase, type Database, migrate } from "@trellis/storage";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { webhookSecretBox } from "../src/webhooks/config.js";
import { webhookMigrations } from "../src/webhooks/schema.js";
import { deliveryIdOf, WebhookStore } from "../src/webhooks/store.js";

let db: Database<unknown>;
let store: WebhookStore;

beforeAll(async () => {
  db = await createDatabase({ kind: "pglite" });
  await migrate(db, { schema: "gateway", migrations: webhookMigrations });
  store = new WebhookStore(db, "gateway");
});
afterAll(async () => {
  await db.close();
});

const subscribe = () =>
  store.create({
    workspaceId: "w1",
    url: "https://hooks.example/trellis",
    secret: "whsec_c2VjcmV0",
    eventTypes: ["task.*"],
    description: "",
    createdBy: "admin",
  });

/** A delivery of event `eventId` to subscription `subscriptionId` (of workspace w1). */
const deliveryOf = (subscriptionId: string, eventId: string, eventType: string) => ({
  subscriptionId,
  workspaceId: "w1",
  eventId,
  eventType,
  body: "{}",
});

describe("webhook delivery queue (PGlite)", () => {
  it("queues an event once per subscription, however often it is seen", async () => {
    const sub = await subscribe();
    const delivery = deliveryOf(sub.id, "evt_1", "task.completed");
    expect(await store.enqueue([delivery])).toBe(1);
    expect(await store.enqueue([delivery, { ...delivery, eventId: "evt_2" }])).toBe(1);
    const rows = await store.deliveries(sub.id, 10);
    expect(rows.map((r) => r.id).sort()).toEqual(
      [deliveryIdOf(sub.id, "evt_1"), deliveryIdOf(sub.id, "evt_2")].sort(),
    );
    expect(rows.every((r) => r.state === "pending" && r.attempts === 0)).toBe(true);
  });

  it("hands a due delivery to one claimer until its lease ends, then records the outcome", async () => {
    const sub = await subscribe();
    await store.enqueue([deliveryOf(sub.id, "evt_9", "task.failed")]);
    const first = (await store.claimDue(100, 60_000)).filter((c) => c.subscription.id === sub.id);
    expect(first).toHaveLength(1);
    expect(first[0]!.subscription.secret).toBe("whsec_c2VjcmV0");
    expect((await store.claimDue(100, 60_000)).some((c) => c.subscription.id === sub.id)).toBe(
      false,
    );
    await store.finish(first[0]!.delivery.id, {
      state: "pending",
      status: 503,
      error: "the receiver answered 503",
      attempts: 1,
      nextAttemptAt: new Date(Date.now() - 1),
    });
    const again = (await store.claimDue(100, 60_000)).filter((c) => c.subscription.id === sub.id);
    expect(again.map((c) => [c.delivery.attempts, c.delivery.last_status])).toEqual([[1, 503]]);
    await store.finish(again[0]!.delivery.id, { state: "delivered", status: 200, attempts: 2 });
    const [row] = await store.deliveries(sub.id, 10);
    expect(row).toMatchObject({
      state: "delivered",
      attempts: 2,
      last_status: 200,
      last_error: null,
    });
  });

  it("cancels pending deliveries of a deleted subscription", async () => {
    const sub = await subscribe();
    await store.enqueue([deliveryOf(sub.id, "evt_5", "task.started")]);
    await store.delete(sub.id);
    expect(await store.get(sub.id)).toBeUndefined();
    expect((await store.deliveries(sub.id, 10)).map((r) => r.state)).toEqual(["canceled"]);
    expect((await store.claimDue(100, 60_000)).some((c) => c.subscription.id === sub.id)).toBe(
      false,
    );
  });

  it("keeps signing secrets encrypted at rest when TRELLIS_WEBHOOK_SECRET_KEY is set", async () => {
    const sealed = new WebhookStore(db, "gateway", webhookSecretBox("operator key material"));
    const sub = await sealed.create({
      workspaceId: "w2",
      url: "https://hooks.example/sealed",
      secret: "whsec_dG9wIHNlY3JldA==",
      eventTypes: ["*"],
      description: "",
      createdBy: "admin",
    });
    const raw = await sql<{ secret: string }>`
      select secret from gateway.webhook_subscriptions where id = ${sub.id}`.execute(db.kysely);
    expect(raw.rows[0]!.secret).toMatch(/^enc:v1:/);
    expect(raw.rows[0]!.secret).not.toContain("dG9wIHNlY3JldA");
    await sealed.enqueue([
      { subscriptionId: sub.id, workspaceId: "w2", eventId: "evt_s", eventType: "x", body: "{}" },
    ]);
    const claimed = (await sealed.claimDue(100, 1)).filter((c) => c.subscription.id === sub.id);
    expect(claimed[0]!.subscription.secret).toBe("whsec_dG9wIHNlY3JldA==");
    // Without the key the secret cannot be used: the delivery fails, saying why.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const keyless = new WebhookStore(db, "gateway");
    expect((await keyless.claimDue(100, 60_000)).some((c) => c.subscription.id === sub.id)).toBe(
      false,
    );
    const [row] = await keyless.deliveries(sub.id, 10);
    expect(row).toMatchObject({ state: "failed" });
    expect(row!.last_error).toMatch(/TRELLIS_WEBHOOK_SECRET_KEY/);
  });
});
