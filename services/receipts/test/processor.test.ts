// The consumer's per-event logic on a real database (PGlite): idempotent
// recording, waiting for a task's missing events, issuing without them in
// the end, and the settings it reads.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AgentDirectory } from "../src/agents.js";
import { loadReceiptsConfig } from "../src/config.js";
import type { ReceiptProcessor } from "../src/processor.js";
import type { PostgresReceiptStore } from "../src/store/receipt-store.js";
import { keyRingOf, newKey } from "../src/testing/receipt-helpers.js";
import { openReceiptsPGlite } from "../src/testing/receipts-database.js";
import { testProcessor } from "../src/testing/test-processor.js";
import { receiptSchemaValidator, taskEvents } from "./support.js";

describe("ReceiptProcessor", () => {
  let close: () => Promise<void>;
  let store: PostgresReceiptStore;
  let processor: ReceiptProcessor;
  let position = 0n;
  const keys = keyRingOf(newKey("key_proc"));
  const asked: [string, string | undefined][] = [];
  const directory: AgentDirectory = {
    agentOfTask: async (taskId, agentId) => {
      asked.push([taskId, agentId]);
      return {
        known: agentId === "agent_echo",
        profile: agentId ? { agentId, tier: "act_with_approval" } : {},
      };
    },
    workspace: async () => ({}),
  };

  beforeAll(async () => {
    ({ store, close } = await openReceiptsPGlite());
    processor = testProcessor({ store, keys, directory });
  });

  afterAll(async () => {
    await close?.();
  });

  const deliver = (event: ReturnType<typeof taskEvents>[number], count = 1) =>
    processor.handle({ event, position: ++position }, count);

  it("records each event once and issues once, however often events come", async () => {
    const events = taskEvents({ taskId: "task_once", sequenced: true });
    for (const event of events) expect(await deliver(event)).toEqual({ ack: true });
    for (const event of events) expect(await deliver(event, 2)).toEqual({ ack: true });
    const page = await store.listTaskReceipts("task_once", 10);
    expect(page.receipts).toHaveLength(1);
    expect((await store.taskEvents("task_once")).length).toBe(events.length);
  });

  it("takes the agent from the started event, never looking the task up", async () => {
    asked.length = 0;
    for (const event of taskEvents({ taskId: "task_agent", sequenced: true })) await deliver(event);
    // The started event is a system event: its agent comes from the payload,
    // and every question to the directory names it (no task lookup).
    expect(asked.length).toBeGreaterThan(0);
    expect(asked.every(([task, agent]) => task === "task_agent" && agent === "agent_echo")).toBe(
      true,
    );
    const [receipt] = (await store.listTaskReceipts("task_agent", 10)).receipts;
    expect(JSON.parse(receipt!.document).trust.start_tier).toBe("act_with_approval");
  });

  it("waits for a task's missing events, then issues the complete receipt", async () => {
    const events = taskEvents({ taskId: "task_late", withTool: true, sequenced: true });
    const terminal = events.at(-1)!;
    const early = events.slice(0, 3);
    const late = events.slice(3, -1);
    for (const event of early) await deliver(event);
    const first = await deliver(terminal, 1);
    expect(first).toMatchObject({ ack: false, retryInMs: 1000 });
    for (const event of late) await deliver(event);
    expect(await deliver(terminal, 2)).toEqual({ ack: true });
    const [receipt] = (await store.listTaskReceipts("task_late", 10)).receipts.filter(
      (r) => r.kind === "task",
    );
    const doc = JSON.parse(receipt!.document);
    expect(receiptSchemaValidator()(doc)).toEqual([]);
    expect(doc.replay_input.determinism).toBe("best_effort");
    expect(doc.chain.merkle_root).toMatch(/^sha256:/);
    expect(doc.side_effects.tool_calls).toHaveLength(1);
    expect(doc.metadata.trellis.event_stream_complete).toBe(true);
  });

  it("issues without the missing events once the wait is over, and says so", async () => {
    const events = taskEvents({ taskId: "task_lost", sequenced: true });
    await deliver(events[0]!);
    // Event 2 and 3 never arrive.
    const terminal = events.at(-1)!;
    expect((await deliver(terminal, 1)).ack).toBe(false);
    expect(await deliver(terminal, 3)).toEqual({ ack: true });
    const [receipt] = (await store.listTaskReceipts("task_lost", 10)).receipts;
    const doc = JSON.parse(receipt!.document);
    expect(receiptSchemaValidator()(doc)).toEqual([]);
    expect(doc.replay_input.determinism).toBe("unavailable");
    expect(doc.replay_input.unavailable_reason).toMatch(/gaps/);
    expect(doc.chain.merkle_root).toBeUndefined();
    expect(doc.metadata.trellis.event_stream_complete).toBe(false);
  });

  it("leaves events recorded after the end out of the task's receipt", async () => {
    const events = taskEvents({ taskId: "task_after", sequenced: true });
    const terminal = events.at(-1)!;
    for (const event of events.slice(0, -1)) await deliver(event);
    // A late event of the task (sequence after the terminal one) is recorded
    // before the terminal event is (re)delivered.
    const extra = structuredClone(terminal);
    extra.id = "evt_task_after_extra";
    extra.kind = "artifact.created";
    extra.sequence = terminal.sequence + 1n;
    extra.payload = {
      $typeName: "trellis.core.v1.EventPayload",
      kind: { case: "data", value: { artifact_id: "art_late" } },
    };
    await deliver(extra);
    expect(await deliver(terminal)).toEqual({ ack: true });
    const [receipt] = (await store.listTaskReceipts("task_after", 10)).receipts;
    const doc = JSON.parse(receipt!.document);
    expect(doc.metadata.trellis.event_stream_complete).toBe(true);
    expect(doc.final_artifacts).toEqual([]);
  });

  it("ignores events about no task and its own announcements", async () => {
    const [event] = taskEvents({ taskId: "task_x", sequenced: true });
    const noTask = structuredClone(event!);
    noTask.taskId = "";
    noTask.resource = { $typeName: "trellis.core.v1.ResourceRef", object: "session", id: "ses_1" };
    expect(await deliver(noTask)).toEqual({ ack: true });
    const issued = structuredClone(event!);
    issued.kind = "receipt.issued";
    expect(await deliver(issued)).toEqual({ ack: true });
    expect(await store.taskEvents("task_x")).toEqual([]);
  });
});

describe("receipts settings", () => {
  it("reads retired keys as a key-id map or a JWKS", () => {
    const jwk = { ...newKey().publicKey.export({ format: "jwk" }), kid: "key_old" };
    expect(
      Object.keys(
        loadReceiptsConfig({ TRELLIS_RECEIPT_OLD_PUBLIC_KEYS: JSON.stringify({ keys: [jwk] }) })
          .oldPublicKeys,
      ),
    ).toEqual(["key_old"]);
    expect(
      loadReceiptsConfig({ TRELLIS_RECEIPT_OLD_PUBLIC_KEYS: JSON.stringify({ key_x: "PEM" }) })
        .oldPublicKeys,
    ).toEqual({ key_x: "PEM" });
    expect(() => loadReceiptsConfig({ TRELLIS_RECEIPT_OLD_PUBLIC_KEYS: "{" })).toThrow(
      /TRELLIS_RECEIPT_OLD_PUBLIC_KEYS/,
    );
    expect(() =>
      loadReceiptsConfig({ TRELLIS_RECEIPT_SIGNING_KEY: "/nonexistent/key.pem" }),
    ).toThrow(/TRELLIS_RECEIPT_SIGNING_KEY/);
  });
});
