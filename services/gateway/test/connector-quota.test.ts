// Connector deliveries and the daily task quota (embedded): a delivery that
// makes a new task uses a unit, checked before anything is stored; a
// redelivery or a delivery that becomes a message gives its unit back; past
// the quota a delivery is 422 policy_violation and stores nothing.

import { harnClient, type Json } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startGatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-connector-quota-admin-0123456789";
const TASKS_PER_DAY = 2;

describe("connector deliveries and the daily task quota", () => {
  let trellis: EmbeddedTrellis;
  let admin: ReturnType<typeof harnClient>;

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY, {
      TRELLIS_QUOTA_TASKS_PER_DAY: String(TASKS_PER_DAY),
    });
    admin = harnClient(trellis.address.url, ADMIN_KEY);
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  async function used(): Promise<number> {
    const quotas = (await admin.get("/v1/quotas")).json.data;
    return quotas.find((q: Json) => q.id === "quota_tasks_per_day_default").usage.tasks_per_day;
  }

  it("counts new tasks only, and refuses past the quota storing nothing", async () => {
    const made = await admin.post("/v1/connectors", { provider: "github" });
    expect(made.status, made.text).toBe(201);
    const path = `/v1/connectors/${made.json.id}/deliveries`;
    const send = (id: string) =>
      admin.post(path, { delivery_id: id, event_kind: "push", payload: {} });

    expect((await send("q-1")).status).toBe(201);
    expect(await used()).toBe(1);
    // Redeliveries make nothing: their units go back.
    expect((await send("q-1")).status).toBe(200);
    expect((await send("q-1")).status).toBe(200);
    expect(await used()).toBe(1);
    // A message connector makes no task either.
    const session = await admin.post("/v1/sessions", {});
    const messages = await admin.post("/v1/connectors", {
      provider: "slack",
      delivery_mode: "message",
      target_session_id: session.json.id,
    });
    const message = await admin.post(`/v1/connectors/${messages.json.id}/deliveries`, {
      delivery_id: "m-1",
      event_kind: "message",
      payload: {},
    });
    expect(message.status, message.text).toBe(201);
    expect(await used()).toBe(1);

    expect((await send("q-2")).status).toBe(201);
    expect(await used()).toBe(TASKS_PER_DAY);
    const over = await send("q-3");
    expect(over.status).toBe(422);
    expect(over.json.error).toMatchObject({
      code: "policy_violation",
      details: { reason: "quota_exceeded" },
    });
    // Nothing of q-3 was stored: its events never happened.
    const events = await admin.get("/v1/events?workspace_id=default&limit=200");
    const ids = events.json.data
      .filter((e: Json) => e.event === "connector.delivery_received")
      .map((e: Json) => e.payload.delivery_id);
    expect(ids.sort()).toEqual(["m-1", "q-1", "q-2"]);
  });
});
