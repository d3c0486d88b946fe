// Receipts of replay tasks, end to end in embedded mode (PGlite and the
// in-process event log): the real tasks service runs a built-in harness
// agent with a tool call against the recorded OpenAI server, replays it
// exactly twice and once with an llm: override, and the real receipts
// service issues the receipts. Done-means of issue 6: the two exact replays
// reproduce the transcript and their receipts' replay projections (the
// canonical form without signatures and run identity; README "Replays") are
// byte-identical; the override replay's receipt differs by its delta.

import { createHash } from "node:crypto";
import { clone, fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { type Message, MessageSchema, TaskStatus } from "@trellis/contracts/core";
import { type Receipt, ReceiptService } from "@trellis/contracts/receipts";
import { ReplayMode, type Task } from "@trellis/contracts/tasks";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { eventually } from "@trellis/testkit";
import { canonicalize } from "json-canonicalize";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createHarnessAdapter,
  createLocalExecutor,
  createScriptedAdapter,
} from "../../adapters/src/index.js";
import { createTools, recordedProviders } from "../../adapters/test/harness/support/agents.js";
import {
  fixture,
  OPENAI_CHAT,
  type RecordedServer,
  startRecordedServer,
} from "../../adapters/test/harness/support/recorded-server.js";
import { createTasksService } from "../../tasks/src/definition.js";
import { createAgent, text, watchUntil } from "../../tasks/test/support/fixtures.js";
import { clientsOf, type TasksClients } from "../../tasks/test/support/harness.js";
import { computeReceiptHash } from "../src/domain/canonical.js";
import { replayProjection, replayProjectionValue } from "../src/domain/replay-projection.js";
import { receiptsService } from "../src/index.js";
import { receiptSchemaPath, receiptSchemaValidator } from "./support.js";

function sha256(value: JsonValue): string {
  return `sha256:${createHash("sha256").update(canonicalize(value)).digest("hex")}`;
}

/** What a replayed message must reproduce of its source (ids, times and the marker differ). */
function comparable(message: Message): JsonValue {
  const copy = clone(MessageSchema, message);
  copy.id = "";
  copy.createdAt = undefined;
  const metadata: JsonObject = { ...(copy.metadata ?? {}) };
  delete metadata.replay;
  copy.metadata = Object.keys(metadata).length > 0 ? metadata : undefined;
  return toJson(MessageSchema, copy);
}

/** Paths (a.b.c, array indices included) where two JSON values differ. */
function diffPaths(a: unknown, b: unknown, path = ""): string[] {
  if (JSON.stringify(a) === JSON.stringify(b)) return [];
  const objA = typeof a === "object" && a !== null;
  const objB = typeof b === "object" && b !== null;
  if (!objA || !objB || Array.isArray(a) !== Array.isArray(b)) return [path || "."];
  const keys = new Set([...Object.keys(a as object), ...Object.keys(b as object)]);
  return [...keys].flatMap((k) =>
    diffPaths(
      (a as Record<string, unknown>)[k],
      (b as Record<string, unknown>)[k],
      path ? `${path}.${k}` : k,
    ),
  );
}

const OVERRIDE = {
  id: "chatcmpl_override_receipt",
  object: "chat.completion",
  model: "gpt-4o-mini-2024-07-18",
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: "Overridden: it is raining in Paris." },
      finish_reason: "stop",
    },
  ],
};

describe("receipts of replay tasks (embedded, built-in harness with a tool call)", () => {
  let trellis: EmbeddedTrellis;
  let c: TasksClients;
  let server: RecordedServer;
  const tools = createTools();
  const validate = receiptSchemaValidator();
  let source: Task;
  let sourceSession: string;

  async function settle(taskId: string): Promise<Task> {
    return (await watchUntil(c, taskId, undefined, { timeoutMs: 30_000 })).task;
  }

  async function messagesOf(sessionId: string): Promise<Message[]> {
    const { messages } = await c.sessions.listMessages({ sessionId, pageSize: 1000 });
    return messages.map((m) => m.message as Message);
  }

  async function receiptOf(taskId: string): Promise<Receipt> {
    return eventually(
      async () => {
        const { receipts } = await trellis
          .client(ReceiptService)
          .listTaskReceipts({ taskId, pageSize: 10 });
        return receipts.find((r) => r.subject?.object === "task");
      },
      { timeoutMs: 20_000, what: `the receipt of ${taskId}` },
    );
  }

  async function replay(mode: ReplayMode, overrides = {}) {
    const { task, session } = await c.tasks.replayTask({
      taskId: source.id,
      mode,
      ...(mode === ReplayMode.WITH_OVERRIDES ? { reason: "what if it rained", overrides } : {}),
    });
    const done = await settle(task?.id as string);
    expect(done.status, done.failure?.message).toBe(TaskStatus.COMPLETED);
    expect(done.parentTaskId).toBe(source.id);
    return { task: done, sessionId: session?.id as string, receipt: await receiptOf(done.id) };
  }

  beforeAll(async () => {
    server = await startRecordedServer();
    const executor = createLocalExecutor([
      createScriptedAdapter(),
      createHarnessAdapter({ providers: recordedProviders(server.url), tools: tools.tools }),
    ]);
    trellis = await startEmbedded({
      services: [createTasksService({ executor, replayTools: tools.tools }), receiptsService],
      port: 0,
      env: {
        ...process.env,
        TRELLIS_LOG_LEVEL: "error",
        TRELLIS_RECEIPT_SCHEMA_FILE: receiptSchemaPath,
      },
    });
    c = clientsOf(createGrpcTransport({ baseUrl: trellis.address.url }));
    const agentId = await createAgent(c, "weather", "harness", {
      provider: "openai",
      model: "gpt-4o-mini",
      system: "You are a helpful assistant.",
      tools: ["get_weather"],
      stream: true,
    });
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.stream.http"),
      fixture("openai/chat-weather-final.stream.http"),
    );
    const { task } = await c.tasks.submitTask({
      createSession: true,
      agentId,
      input: text("What's the weather in Paris?"),
    });
    source = await settle(task?.id as string);
    sourceSession = task?.sessionId as string;
    expect(source.status, source.failure?.message).toBe(TaskStatus.COMPLETED);
    expect(tools.runs.get_weather).toHaveLength(1);
    // From here on no provider answers: replays must not need one.
    await server.close();
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 1000 });
  });

  it("two exact replays: same transcript, byte-identical replay projections; an override differs by its delta", async () => {
    const sourceReceipt = await receiptOf(source.id);
    const first = await replay(ReplayMode.EXACT);
    const second = await replay(ReplayMode.EXACT);
    expect(first.task.id).not.toBe(second.task.id);

    // Same transcript as the source, tool call included; the tool did not run again.
    const original = (await messagesOf(sourceSession)).map(comparable);
    expect((await messagesOf(first.sessionId)).map(comparable)).toEqual(original);
    expect((await messagesOf(second.sessionId)).map(comparable)).toEqual(original);
    expect(tools.runs.get_weather).toHaveLength(1);

    const docs = [first, second].map((r) => JSON.parse(r.receipt.documentJson));
    for (const doc of docs) {
      expect(validate(doc)).toEqual([]);
      expect(computeReceiptHash(doc)).toBe(doc.chain.receipt_hash);
      // The replay's inputs: the source's event log, its receipt, the cursor, the mode.
      expect(doc.replay_input.determinism).toBe("byte_deterministic");
      expect(doc.replay_input.materials[0]).toMatchObject({
        kind: "event_log",
        id: source.id,
        sha256: JSON.parse(sourceReceipt.documentJson).chain.merkle_root,
        metadata: {
          role: "replay_source",
          source_receipt_id: sourceReceipt.id,
          source_receipt_hash: sourceReceipt.receiptHash,
          mode: "exact",
          replay_cursor: expect.stringMatching(new RegExp(`^${source.id}:\\d+$`)),
          unused_override_keys: [],
        },
      });
      expect(doc.deltas).toEqual([]);
      expect(doc.side_effects.tool_calls).toEqual([
        expect.objectContaining({ tool: "get_weather", status: "succeeded" }),
      ]);
      expect(doc.side_effects.tool_calls[0].input_hash).toMatch(/^sha256:[0-9a-f]{64}$/);
    }
    // The run's own identity differs, so the full canonical forms differ …
    expect(first.receipt.receiptHash).not.toBe(second.receipt.receiptHash);
    // … and the replay projections are byte-identical.
    const exact = replayProjection(first.receipt.documentJson);
    expect(replayProjection(second.receipt.documentJson)).toBe(exact);
    // The projection keeps the source-derived content (not an empty shell).
    expect(exact).toContain(source.id);
    expect(exact).toContain(sourceReceipt.receiptHash);
    expect(exact).toContain(docs[0].side_effects.tool_calls[0].input_hash);
    expect(exact).not.toContain(first.task.id);

    // with_overrides: the answer of the second model call is substituted.
    const overridden = await replay(ReplayMode.WITH_OVERRIDES, {
      "llm:main:2": {
        kind: "llm_provider_response",
        value: fromJson(ValueSchema, OVERRIDE),
        sha256: sha256(OVERRIDE),
      },
    });
    const doc = JSON.parse(overridden.receipt.documentJson);
    expect(validate(doc)).toEqual([]);
    expect(doc.replay_input.determinism).toBe("byte_deterministic");
    expect(doc.deltas).toHaveLength(1);
    const before = doc.deltas[0].before_sha256;
    expect(doc.deltas[0]).toEqual({
      delta_id: `${overridden.task.id}:llm:main:2`,
      operation: "replace",
      path: "metadata.llm:main:2.response",
      override_key: "llm:main:2",
      event_id: expect.any(String),
      before_sha256: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      after_sha256: sha256(OVERRIDE),
      reason: "what if it rained",
    });
    expect(before).not.toBe(sha256(OVERRIDE));
    expect(doc.replay_input.materials[2]).toEqual({
      kind: "llm_provider_response",
      id: "llm:main:2",
      sha256: sha256(OVERRIDE),
      metadata: {
        role: "replay_override",
        override_key: "llm:main:2",
        override_kind: "llm_provider_response",
        visibility: "receipt_only",
      },
    });
    // Against the exact replays' projection, it differs in the delta, the
    // override it declares, and the mode that says why — nothing else.
    const paths = diffPaths(
      replayProjectionValue(first.receipt.documentJson),
      replayProjectionValue(overridden.receipt.documentJson),
    );
    expect(paths.sort()).toEqual(
      [
        "deltas.0",
        "metadata.trellis.replay_mode",
        "replay_input.materials.0.metadata.mode",
        "replay_input.materials.2",
      ].sort(),
    );
  }, 120_000);
});
