/**
 * Session ids are unique per workspace (issue 22, finding 4): over REST,
 * another workspace creating a session with a taken client-chosen id gets
 * 201 and its own session, not 409; reads, transcripts, events, SSE,
 * receipts and forks of the two stay apart. Both tasks stores: relational
 * (TRELLIS_TASKS_JOURNAL=false) and the session owner.
 */
import { randomBytes } from "node:crypto";
import { harnClient, poll } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import type { PostgresKeyStore } from "../src/store/key-store.js";
import { gatewayKeyStore } from "./support/embedded.js";

const ADMIN_KEY = `trellis-session-ids-admin-${randomBytes(16).toString("hex")}`;
const SCOPES = [
  "sessions:read",
  "sessions:write",
  "tasks:read",
  "tasks:write",
  "events:read",
  "receipts:read",
];

describe.each([
  { store: "relational", journal: "false" },
  { store: "session owner", journal: "owner" },
])("session ids per workspace over REST ($store store)", ({ journal }) => {
  let trellis: EmbeddedTrellis;
  let base: string;
  let keys: PostgresKeyStore;

  beforeAll(async () => {
    trellis = await startEmbedded({
      services: [gatewayService, tasksService, receiptsService],
      port: 0,
      logger: createLogger({ service: "test", level: "error" }),
      env: {
        TRELLIS_API_KEY: ADMIN_KEY,
        TRELLIS_LOG_LEVEL: "error",
        TRELLIS_TASKS_JOURNAL: journal,
      },
    });
    base = trellis.address.url;
    keys = gatewayKeyStore(trellis);
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  const clientOf = async (workspaceId: string) =>
    harnClient(
      base,
      (await keys.create({ name: workspaceId, actorId: workspaceId, workspaceId, scopes: SCOPES }))
        .key,
    );

  const textsOf = async (api: ReturnType<typeof harnClient>, id: string) => {
    const page = await api.get(`/v1/sessions/${id}/messages?limit=100`);
    expect(page.status, page.text).toBe(200);
    return JSON.stringify(page.json.data);
  };

  async function runTurn(api: ReturnType<typeof harnClient>, id: string, input: string) {
    const task = await api.post(`/v1/sessions/${id}/tasks`, { input });
    expect(task.status, task.text).toBe(202);
    await poll(
      async () => {
        const t = await api.get(`/v1/tasks/${task.json.id}`);
        return t.json.status === "COMPLETED" ? true : undefined;
      },
      { timeoutMs: 20_000, what: `task ${task.json.id} completed` },
    );
    return task.json.id as string;
  }

  it("gives another workspace its own session of a taken id, apart in every read", async () => {
    const a = await clientOf("ws_ids_a");
    const b = await clientOf("ws_ids_b");
    const id = `ses_team_standup_${randomBytes(4).toString("hex")}`;

    const mine = await a.post("/v1/sessions", { id });
    expect(mine.status, mine.text).toBe(201);
    expect(mine.json).toMatchObject({ id, workspace_id: "ws_ids_a" });
    const theirs = await b.post("/v1/sessions", { id });
    expect(theirs.status, theirs.text).toBe(201);
    expect(theirs.json).toMatchObject({ id, workspace_id: "ws_ids_b" });
    // Still unique within one workspace.
    expect((await a.post("/v1/sessions", { id })).status).toBe(409);
    expect((await a.get(`/v1/sessions/${id}`)).json.workspace_id).toBe("ws_ids_a");
    expect((await b.get(`/v1/sessions/${id}`)).json.workspace_id).toBe("ws_ids_b");

    // B's session streams only B's turn; then A's turn runs in A's session.
    const stream = await b.stream(`/v1/sessions/${id}/events/stream`);
    const bTask = await runTurn(b, id, "bravo speaks");
    const frames = await stream.until((f) => (f.data ?? "").includes("bravo speaks"), 15_000);
    const aTask = await runTurn(a, id, "alpha speaks");
    stream.close();
    expect(frames.map((f) => f.data ?? "").join("\n")).not.toContain("alpha speaks");

    const aTexts = await textsOf(a, id);
    const bTexts = await textsOf(b, id);
    expect(aTexts).toContain("alpha speaks");
    expect(aTexts).not.toContain("bravo speaks");
    expect(bTexts).toContain("bravo speaks");
    expect(bTexts).not.toContain("alpha speaks");

    const events = async (api: ReturnType<typeof harnClient>) =>
      poll(async () => {
        const page = await api.get(`/v1/sessions/${id}/events?limit=200`);
        const text = JSON.stringify(page.json?.data ?? []);
        return page.status === 200 && text.includes("speaks") ? text : undefined;
      });
    expect(await events(a)).not.toContain("bravo speaks");
    expect(await events(b)).not.toContain("alpha speaks");

    // Receipts: each workspace reads its own task's, not the other's.
    for (const [api, own, other] of [
      [a, aTask, bTask],
      [b, bTask, aTask],
    ] as const) {
      await poll(async () => {
        const r = await api.get(`/v1/tasks/${own}/receipts`);
        return r.status === 200 && r.json.data.length > 0 ? true : undefined;
      });
      expect((await api.get(`/v1/tasks/${other}/receipts`)).status).toBe(404);
    }

    // A fork of B's session copies B's transcript only.
    const fork = await b.post(`/v1/sessions/${id}/fork`, {});
    expect(fork.status, fork.text).toBe(201);
    expect(fork.json.workspace_id).toBe("ws_ids_b");
    const forked = await textsOf(b, fork.json.id);
    expect(forked).toContain("bravo speaks");
    expect(forked).not.toContain("alpha speaks");

    // Closing A's leaves B's open.
    expect((await a.post(`/v1/sessions/${id}/close`, {})).status).toBe(200);
    expect((await b.get(`/v1/sessions/${id}`)).json.state).not.toBe(
      (await a.get(`/v1/sessions/${id}`)).json.state,
    );
  });
});
