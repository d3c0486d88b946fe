// The receipts service in embedded mode: synthetic task events go through
// the outbox as the tasks service's will; receipts come out schema-valid,
// one per terminal task (and per approval), chained without gaps per
// workspace, verifiable over gRPC and REST, and tampering shows.

import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { type Receipt, ReceiptService } from "@trellis/contracts/receipts";
import {
  AgentSchema,
  AgentService,
  AutonomyTier,
  ReceiptPolicy,
  TaskService,
  WorkspaceService,
} from "@trellis/contracts/tasks";
import {
  type EmbeddedTrellis,
  type ServiceContext,
  type ServiceDefinition,
  startEmbedded,
} from "@trellis/platform";
import { eventually } from "@trellis/testkit";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { receiptsService } from "../src/index.js";
import {
  appendEvents,
  producerService,
  receiptSchemaPath,
  receiptSchemaValidator,
  taskEvents,
} from "./support.js";

/** Just enough of the tasks service for the receipts service to ask about agents. */
function fakeTasks(): ServiceDefinition {
  const agents = {
    agent_auto: create(AgentSchema, {
      id: "agent_auto",
      name: "auto",
      version: "3",
      backend: "builtin",
      autonomyTier: AutonomyTier.ACT_AUTO,
      receiptPolicy: ReceiptPolicy.REQUIRED,
      metadata: { autonomy_budget: { usd: 5, tool_calls: 10 } },
    }),
    agent_off: create(AgentSchema, {
      id: "agent_off",
      backend: "scripted",
      autonomyTier: AutonomyTier.SUGGEST,
      receiptPolicy: ReceiptPolicy.DISABLED,
    }),
  } as Record<string, ReturnType<typeof create<typeof AgentSchema>>>;
  const taskAgents: Record<string, string> = { task_quiet: "agent_off", task_strict: "agent_off" };
  return {
    name: "faketasks",
    provides: [],
    defaultPort: 0,
    create: () => ({
      routes(router) {
        router.service(AgentService, {
          async getAgent({ agentId }) {
            const agent = agents[agentId];
            if (!agent) throw new ConnectError("no agent", Code.NotFound);
            return { agent };
          },
        });
        router.service(TaskService, {
          async getTask({ taskId }) {
            const agentId = taskAgents[taskId];
            if (!agentId) throw new ConnectError("no task", Code.NotFound);
            return { task: { id: taskId, agentId } };
          },
        });
        router.service(WorkspaceService, {
          async getWorkspace({ workspaceId }) {
            if (workspaceId !== "ws_strict") throw new ConnectError("no workspace", Code.NotFound);
            return { workspace: { id: workspaceId, metadata: { receipt_policy: "required" } } };
          },
        });
      },
    }),
  };
}

function fetchJson(trellis: EmbeddedTrellis, path: string, init: RequestInit = {}) {
  return fetch(`${trellis.address.url}${path}`, init).then(async (res) => ({
    status: res.status,
    type: res.headers.get("content-type") ?? "",
    text: await res.text(),
  }));
}

describe("receipts service (embedded)", () => {
  let trellis: EmbeddedTrellis;
  let producer: ServiceContext;
  let receiptsCtx: ServiceContext;
  const client = () => trellis.client(ReceiptService);

  async function listAll(workspaceId: string): Promise<Receipt[]> {
    const out: Receipt[] = [];
    let pageToken = "";
    do {
      const page = await client().listReceipts({ workspaceId, pageSize: 7, pageToken });
      out.push(...page.receipts);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return out;
  }

  async function waitForReceipts(workspaceId: string, count: number): Promise<Receipt[]> {
    return eventually(
      async () => {
        const all = await listAll(workspaceId);
        return all.length >= count ? all : undefined;
      },
      { timeoutMs: 20_000, what: `${count} receipts in ${workspaceId}` },
    );
  }

  beforeAll(async () => {
    trellis = await startEmbedded({
      services: [producerService((c) => (producer = c)), fakeTasks(), receiptsService],
      port: 0,
      env: { TRELLIS_RECEIPT_SCHEMA_FILE: receiptSchemaPath, TRELLIS_RECEIPT_GAP_WAIT: "3s" },
    });
    receiptsCtx = trellis.contexts.get("receipts") as ServiceContext;
  });

  afterAll(async () => {
    await trellis?.close({ graceMs: 100 });
  });

  it("issues one schema-valid receipt per terminal task and per approval, chained without gaps", async () => {
    const validate = receiptSchemaValidator();
    const scripts = [
      { taskId: "task_a1", workspaceId: "ws_a" },
      { taskId: "task_a2", workspaceId: "ws_a", withTool: true, withModel: true },
      { taskId: "task_a3", workspaceId: "ws_a", final: "FAILED" as const },
      { taskId: "task_b1", workspaceId: "ws_b", final: "CANCELED" as const },
      { taskId: "task_a4", workspaceId: "ws_a", agentId: "agent_auto", withTool: true },
    ];
    for (const script of scripts) await appendEvents(producer, taskEvents(script));
    const a = await waitForReceipts("ws_a", 6);
    const b = await waitForReceipts("ws_b", 1);
    expect(a).toHaveLength(6);
    expect(b).toHaveLength(1);
    for (const chain of [a, b]) {
      chain.forEach((receipt, i) => {
        expect(receipt.chainIndex).toBe(BigInt(i + 1));
        expect(receipt.previousReceiptHash).toBe(i === 0 ? "" : chain[i - 1]?.receiptHash);
        const doc = JSON.parse(receipt.documentJson);
        expect(validate(doc)).toEqual([]);
        expect(doc.chain.receipt_hash).toBe(receipt.receiptHash);
        expect(doc.chain.previous_receipt_hash).toBe(i === 0 ? null : chain[i - 1]?.receiptHash);
      });
    }
    const subjects = a.map((r) => `${r.subject?.object}:${r.subject?.id}`).sort();
    expect(subjects).toEqual(
      [
        "task:task_a1",
        "task:task_a2",
        "task:task_a3",
        "task:task_a4",
        "approval:evt_task_a2_7",
        "approval:evt_task_a4_6",
      ].sort(),
    );
    for (const receipt of [...a, ...b]) {
      const result = await client().verifyReceipt({
        target: { case: "receiptId", value: receipt.id },
      });
      expect(result.problems).toEqual([]);
      expect(result.valid).toBe(true);
      expect(result.checks).toContain("schema");
    }
    // The agent was read from the tasks service: its tier, persona and budget.
    const auto = a.find((r) => r.subject?.id === "task_a4");
    const doc = JSON.parse(auto?.documentJson ?? "{}");
    expect(doc.trust).toEqual({ start_tier: "act_auto", end_tier: "act_auto" });
    expect(doc.identifiers.persona_ref).toBe("agent_auto@3");
    expect(doc.autonomy_budget.limit).toEqual({ usd: 5, tool_calls: 10 });
    expect(doc.model_route.chosen_model).toEqual({ provider: "trellis", model: "builtin" });
    // A task receipt of an unknown agent falls back to defaults, saying so.
    const plain = JSON.parse(a.find((r) => r.subject?.id === "task_a1")?.documentJson ?? "{}");
    expect(plain.metadata.trellis.agent_known).toBe(false);
    expect(plain.trust.start_tier).toBe("suggest");
  });

  it("announces each receipt with a receipt.issued event", async () => {
    const events = await eventually(async () => {
      const read = await receiptsCtx.eventLog.read({ filter: { workspaceId: "ws_b" } });
      const issued = read.filter((e) => e.event.kind === "receipt.issued");
      return issued.length ? issued : undefined;
    });
    expect(events[0]?.event.resource?.object).toBe("receipt");
    expect(events[0]?.event.taskId).toBe("task_b1");
  });

  it("never issues twice for the same task, even when its end is reported again", async () => {
    const events = taskEvents({ taskId: "task_dup", workspaceId: "ws_dup" });
    await appendEvents(producer, events);
    await waitForReceipts("ws_dup", 1);
    const again = taskEvents({ taskId: "task_dup", workspaceId: "ws_dup" }).slice(-1);
    again[0]!.id = "evt_task_dup_again";
    await appendEvents(producer, again);
    await appendEvents(producer, taskEvents({ taskId: "task_dup2", workspaceId: "ws_dup" }));
    const all = await waitForReceipts("ws_dup", 2);
    expect(all.map((r) => r.subject?.id)).toEqual(["task_dup", "task_dup2"]);
  });

  it("follows the receipt policy of the agent and the workspace", async () => {
    // task_quiet's events do not name its agent (written before they did):
    // the receipts service asks the tasks service.
    await appendEvents(
      producer,
      taskEvents({ taskId: "task_quiet", workspaceId: "ws_policy", startedWithoutAgent: true }),
    );
    await appendEvents(
      producer,
      taskEvents({ taskId: "task_strict", workspaceId: "ws_strict", agentId: "agent_off" }),
    );
    await appendEvents(producer, taskEvents({ taskId: "task_loud", workspaceId: "ws_policy" }));
    const policy = await waitForReceipts("ws_policy", 1);
    expect(policy.map((r) => r.subject?.id)).toEqual(["task_loud"]);
    // ws_strict requires receipts whatever the agent says.
    const strict = await waitForReceipts("ws_strict", 1);
    expect(JSON.parse(strict[0]?.documentJson ?? "{}").metadata.trellis.receipt_policy).toBe(
      "required",
    );
  });

  it("serves the Harn REST routes, scoped to the caller's workspace", async () => {
    const [first] = await waitForReceipts("ws_a", 1);
    const id = first?.id as string;
    const resource = await fetchJson(trellis, `/v1/receipts/${id}`);
    expect(resource.status).toBe(200);
    const body = JSON.parse(resource.text);
    expect(body).toMatchObject({
      id,
      object: "receipt",
      format: "receipt-2026-04-25",
      subject: { object: "task", id: "task_a1" },
      issuer: "trellis",
      wire: { schema_version: "receipt-2026-04-25", signature: { algorithm: "ed25519" } },
    });
    expect(body.wire.payload.receipt_id).toBe(id);

    const raw = await fetchJson(trellis, `/v1/receipts/${id}`, {
      headers: { accept: "application/vnd.harn.receipt+json" },
    });
    expect(raw.text).toBe(first?.documentJson);

    const verified = await fetchJson(trellis, `/v1/receipts/${id}/verify`, { method: "POST" });
    expect(JSON.parse(verified.text)).toMatchObject({ valid: true, reason: null, problems: [] });

    const list = await fetchJson(trellis, "/v1/tasks/task_a2/receipts?limit=1");
    const page = JSON.parse(list.text);
    expect(page.object).toBe("list");
    expect(page.data).toHaveLength(1);
    expect(page.page.has_more).toBe(true);
    const rest = JSON.parse(
      (await fetchJson(trellis, `/v1/tasks/task_a2/receipts?cursor=${page.page.next_cursor}`)).text,
    );
    expect(rest.data.map((r: { subject: { object: string } }) => r.subject.object).sort()).toEqual([
      "task",
    ]);

    const outsider = { "x-trellis-actor": "user_9", "x-trellis-workspace": "ws_b" };
    const hidden = await fetchJson(trellis, `/v1/receipts/${id}`, { headers: outsider });
    expect(hidden.status).toBe(404);
    expect(JSON.parse(hidden.text).error).toMatchObject({
      code: "resource_not_found",
      type: "not_found_error",
    });
    const insider = { "x-trellis-actor": "user_1", "x-trellis-workspace": "ws_a" };
    expect((await fetchJson(trellis, `/v1/receipts/${id}`, { headers: insider })).status).toBe(200);
    expect((await fetchJson(trellis, "/v1/receipts/rcpt_nope")).status).toBe(404);

    // An exported document verifies offline-style through the API too.
    const supplied = await fetchJson(trellis, "/v1/receipts/verify", {
      method: "POST",
      body: first?.documentJson ?? "",
    });
    expect(JSON.parse(supplied.text).valid).toBe(true);
    const keys = JSON.parse((await fetchJson(trellis, "/v1/receipts/public-keys")).text);
    expect(keys.data[0].jwk).toMatchObject({ kty: "OKP", crv: "Ed25519" });
  });

  it("reports a tampered or reordered stored chain as invalid", async () => {
    const chain = await waitForReceipts("ws_a", 6);
    const kysely = receiptsCtx.db.kysely;
    const [r1, r2, r3] = chain as [Receipt, Receipt, Receipt];
    // Change one byte of a stored receipt.
    await sql`update receipts.receipts set document = replace(document, '"final_state":"SUCCEEDED"', '"final_state":"SUCCEEDEE"') where id = ${r1.id}`.execute(
      kysely,
    );
    const tampered = await client().verifyReceipt({ target: { case: "receiptId", value: r1.id } });
    expect(tampered.valid).toBe(false);
    expect(tampered.problems.map((p) => p.code)).toContain("hash_mismatch");
    await sql`update receipts.receipts set document = ${r1.documentJson} where id = ${r1.id}`.execute(
      kysely,
    );
    expect(
      (await client().verifyReceipt({ target: { case: "receiptId", value: r1.id } })).valid,
    ).toBe(true);
    // Swap two receipts' places in the chain.
    await kysely.transaction().execute(async (trx) => {
      await sql`update receipts.receipts set chain_index = -1 where id = ${r2.id}`.execute(trx);
      await sql`update receipts.receipts set chain_index = 2 where id = ${r3.id}`.execute(trx);
      await sql`update receipts.receipts set chain_index = 3 where id = ${r2.id}`.execute(trx);
    });
    const moved = await client().verifyReceipt({ target: { case: "receiptId", value: r3.id } });
    expect(moved.valid).toBe(false);
    expect(moved.problems.map((p) => p.code)).toContain("chain_previous_mismatch");
    await kysely.transaction().execute(async (trx) => {
      await sql`update receipts.receipts set chain_index = -1 where id = ${r2.id}`.execute(trx);
      await sql`update receipts.receipts set chain_index = 3 where id = ${r3.id}`.execute(trx);
      await sql`update receipts.receipts set chain_index = 2 where id = ${r2.id}`.execute(trx);
    });
    expect(
      (await client().verifyReceipt({ target: { case: "receiptId", value: r3.id } })).valid,
    ).toBe(true);
  });
});

describe("receipts service keys (embedded, on disk)", () => {
  const dirs: string[] = [];
  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  it("keeps its generated key across restarts and old receipts verifiable after rotation", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trellis-receipts-"));
    dirs.push(dataDir);
    let producer: ServiceContext | undefined;
    const start = (env: Record<string, string> = {}) =>
      startEmbedded({
        services: [producerService((c) => (producer = c)), receiptsService],
        dataDir,
        port: 0,
        env,
      });
    const wait = (t: EmbeddedTrellis, n: number) =>
      eventually(async () => {
        const { receipts } = await t.client(ReceiptService).listReceipts({ workspaceId: "ws_k" });
        return receipts.length >= n ? receipts : undefined;
      });

    let trellis = await start();
    await appendEvents(producer!, taskEvents({ taskId: "task_k1", workspaceId: "ws_k" }));
    const [first] = await wait(trellis, 1);
    const keyFile = join(dataDir, "receipt-signing-key.pem");
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    await trellis.close({ graceMs: 100 });

    trellis = await start();
    await appendEvents(producer!, taskEvents({ taskId: "task_k2", workspaceId: "ws_k" }));
    const afterRestart = await wait(trellis, 2);
    expect(afterRestart[1]?.keyId).toBe(first?.keyId);
    await trellis.close({ graceMs: 100 });

    // Rotate: a configured key replaces the generated one.
    const pem = generateKeyPairSync("ed25519")
      .privateKey.export({ type: "pkcs8", format: "pem" })
      .toString();
    trellis = await start({ TRELLIS_RECEIPT_SIGNING_KEY: pem, TRELLIS_RECEIPT_KEY_ID: "key_2027" });
    try {
      await appendEvents(producer!, taskEvents({ taskId: "task_k3", workspaceId: "ws_k" }));
      const all = await wait(trellis, 3);
      expect(all.map((r) => r.keyId)).toEqual([first?.keyId, first?.keyId, "key_2027"]);
      for (const receipt of all) {
        const result = await trellis
          .client(ReceiptService)
          .verifyReceipt({ target: { case: "receiptId", value: receipt.id } });
        expect(result.problems).toEqual([]);
      }
      const keys = await trellis.client(ReceiptService).getPublicKeys({});
      expect(keys.currentKeyId).toBe("key_2027");
      expect(keys.keys.map((k) => k.keyId).sort()).toEqual([first?.keyId, "key_2027"].sort());
    } finally {
      await trellis.close({ graceMs: 100 });
    }
  });
});
