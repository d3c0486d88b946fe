// Receipts of replay tasks, end to end in embedded mode (PGlite and the
// in-process event log): the real tasks service runs a built-in harness
// agent with a tool call against the recorded OpenAI server, replays it
// exactly twice and once with an llm: override, and the real receipts
// service issues the receipts. Done-means of issue 6: the two exact replays
// reproduce the transcript and their receipts' replay projections (the
// canonical form without signatures and run identity; README "Replays") are
// byte-identical; the override replay's receipt differs by its delta.
// Also: the harness's model route, tokens and priced cost and its tool
// results' output hashes reach the receipts; a from_checkpoint replay of an
// approval-gated task references the checkpoint; time: / secret: overrides
// of a deterministic tool's clock and secret reads are applied and become
// deltas. The provider server is closed before any replay: replays never
// call a provider.

import { createHash } from "node:crypto";
import { clone, fromJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { type Message, MessageSchema, TaskStatus } from "@trellis/contracts/core";
import { type Receipt, ReceiptService } from "@trellis/contracts/receipts";
import { ReplayMode, type Task } from "@trellis/contracts/tasks";
import {
  createLocalExecutor,
  createScriptedAdapter,
  type HarnessTool,
  textSha256,
} from "@trellis/execution";
import {
  createTools,
  enqueueChat,
  type RecordedServer,
  startRecordedHarness,
  weatherAgent,
  weatherTurn,
} from "@trellis/execution/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import type { SecretFingerprint } from "@trellis/runtime";
import { createTasksService } from "@trellis/tasks";
import {
  clientsOf,
  comparable,
  createAgent,
  decodeMessages,
  encodeMessages,
  type TasksClients,
  text,
  watchUntil,
} from "@trellis/tasks/testing";
import { eventually } from "@trellis/testkit";
import { canonicalize } from "json-canonicalize";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { computeReceiptHash } from "../src/domain/canonical.js";
import { replayProjection, replayProjectionValue } from "../src/domain/replay-projection.js";
import { receiptsService } from "../src/index.js";
import { receiptSchemaPath, receiptSchemaValidator } from "./support.js";

function sha256(value: JsonValue): string {
  return `sha256:${createHash("sha256").update(canonicalize(value)).digest("hex")}`;
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

const SECRET = "wx-secret-value-0123456789abcdef";
const CLOCK = new Date("2026-11-22T09:30:00.000Z");
/** USD per million tokens of the OpenAI model the fixtures name (TRELLIS_RECEIPT_MODEL_PRICES). */
const PRICE = { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6 };

describe("receipts of replay tasks (embedded, built-in harness with a tool call)", () => {
  let trellis: EmbeddedTrellis;
  let c: TasksClients;
  let server: RecordedServer;
  const email = createTools();
  const weatherRuns: { city: string; checkedAt: string; authorized: boolean }[] = [];
  /**
   * The shared test tools' weather tool (its name, description and input),
   * deterministic here and reading the clock and an API key through the harness.
   */
  const weather: HarnessTool = {
    ...(email.tools.find((t) => t.name === "get_weather") as HarnessTool),
    deterministic: true,
    run(input, context) {
      const checkedAt = context.now("checked_at");
      const authorized = context.secret("WEATHER_API_KEY") === SECRET;
      weatherRuns.push({ city: input.city as string, checkedAt, authorized });
      return { city: input.city as string, temperature_c: 18, sky: "sunny", checkedAt, authorized };
    },
  };
  const tools = [weather, ...email.tools.filter((t) => t.name !== "get_weather")];
  const validate = receiptSchemaValidator();
  let source: Task;
  let sourceSession: string;
  /** An approval-gated harness task (send_email), approved once. */
  let approved: Task;
  let approvedSession: string;
  let checkpointId: string;

  /**
   * Checks the receipt of a replay of `sourceId`: valid, sealed over its own
   * hash, byte-deterministic, and naming as its first material the source's
   * event log, with the source's receipt and `metadata` (the mode and what
   * else the replay names).
   */
  function expectReplayOfSource(
    receipt: Receipt,
    sourceId: string,
    sourceReceipt: Receipt,
    metadata: Record<string, unknown>,
  ): void {
    const doc = JSON.parse(receipt.documentJson);
    expect(validate(doc)).toEqual([]);
    expect(computeReceiptHash(doc)).toBe(doc.chain.receipt_hash);
    // The replay's inputs: the source's event log, its receipt, the cursor, the mode.
    expect(doc.replay_input.determinism).toBe("byte_deterministic");
    expect(doc.replay_input.materials[0]).toMatchObject({
      kind: "event_log",
      id: sourceId,
      sha256: JSON.parse(sourceReceipt.documentJson).chain.merkle_root,
      metadata: {
        role: "replay_source",
        source_receipt_id: sourceReceipt.id,
        source_receipt_hash: sourceReceipt.receiptHash,
        replay_cursor: expect.stringMatching(new RegExp(`^${sourceId}:\\d+$`)),
        unused_override_keys: [],
        ...metadata,
      },
    });
  }

  /** The deployment's keyed fingerprint of a secret value (its key is in the embedded database). */
  function fingerprintOf(value: string): SecretFingerprint {
    const fingerprints = trellis.contexts.get("tasks")?.fingerprints;
    if (!fingerprints) throw new Error("the tasks service is not running");
    return fingerprints.of(value);
  }

  /** A replay task's transcript, events and receipt, as JSON texts. */
  async function everythingOf(replayed: { task: Task; sessionId: string; receipt: Receipt }) {
    const { events } = await c.events.listEvents({ taskId: replayed.task.id, limit: 1000 });
    const bigints = (_k: string, v: unknown) => (typeof v === "bigint" ? String(v) : v);
    return {
      messages: JSON.stringify(await messagesOf(replayed.sessionId), bigints),
      events: JSON.stringify(events, bigints),
      receipt: replayed.receipt.documentJson,
    };
  }

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

  async function replay(
    mode: ReplayMode,
    overrides = {},
    extra: { taskId?: string; checkpointId?: string; reason?: string } = {},
  ) {
    const { task, session } = await c.tasks.replayTask({
      taskId: extra.taskId ?? source.id,
      mode,
      ...(mode === ReplayMode.WITH_OVERRIDES
        ? { reason: extra.reason ?? "what if it rained", overrides }
        : {}),
      ...(extra.checkpointId ? { checkpointId: extra.checkpointId } : {}),
    });
    const done = await settle(task?.id as string);
    expect(done.status, done.failure?.message).toBe(TaskStatus.COMPLETED);
    expect(done.parentTaskId).toBe(extra.taskId ?? source.id);
    return { task: done, sessionId: session?.id as string, receipt: await receiptOf(done.id) };
  }

  beforeAll(async () => {
    const harness = await startRecordedHarness({
      tools,
      environment: {
        now: () => CLOCK,
        secret: (name) => (name === "WEATHER_API_KEY" ? SECRET : undefined),
        // As the in-process harness does: the deployment's fingerprints.
        fingerprint: (value) => fingerprintOf(value),
      },
    });
    server = harness.server;
    const executor = createLocalExecutor([createScriptedAdapter(), harness.adapter]);
    trellis = await startEmbedded({
      services: [createTasksService({ executor, replayTools: tools }), receiptsService],
      port: 0,
      env: {
        ...process.env,
        TRELLIS_LOG_LEVEL: "error",
        TRELLIS_RECEIPT_SCHEMA_FILE: receiptSchemaPath,
        TRELLIS_RECEIPT_MODEL_PRICES: JSON.stringify({ "openai/gpt-4o-mini*": PRICE }),
      },
    });
    c = clientsOf(createGrpcTransport({ baseUrl: trellis.address.url }));
    const agentId = await createAgent(c, "weather", "harness", weatherAgent({ stream: true }));
    enqueueChat(server, ...weatherTurn({ stream: true }));
    const { task } = await c.tasks.submitTask({
      createSession: true,
      agentId,
      input: text("What's the weather in Paris?"),
    });
    source = await settle(task?.id as string);
    sourceSession = task?.sessionId as string;
    expect(source.status, source.failure?.message).toBe(TaskStatus.COMPLETED);
    expect(weatherRuns).toEqual([
      { city: "Paris", checkedAt: CLOCK.toISOString(), authorized: true },
    ]);

    // An approval-gated call: suspended, approved, sent, answered.
    const mailer = await createAgent(c, "mailer", "harness", {
      provider: "openai",
      model: "gpt-4o-mini",
      system: "You are a helpful assistant.",
      tools: ["send_email"],
      stream: false,
    });
    enqueueChat(server, "openai/chat-email-tool-call.http", "openai/chat-email-sent.http");
    const submitted = await c.tasks.submitTask({
      createSession: true,
      agentId: mailer,
      input: text("Email Bob about lunch."),
    });
    const waiting = (
      await watchUntil(
        c,
        submitted.task?.id as string,
        (t) => t.status === TaskStatus.INPUT_REQUIRED || t.status === TaskStatus.FAILED,
        { timeoutMs: 30_000 },
      )
    ).task;
    expect(waiting.status, waiting.failure?.message).toBe(TaskStatus.INPUT_REQUIRED);
    checkpointId = waiting.suspension?.checkpointId as string;
    expect(checkpointId).toMatch(/^chk_/);
    await c.signals.deliver({
      signalId: waiting.suspension?.signalId as string,
      payload: fromJson(ValueSchema, { approved: true }),
    });
    approved = await settle(waiting.id);
    approvedSession = submitted.task?.sessionId as string;
    expect(approved.status, approved.failure?.message).toBe(TaskStatus.COMPLETED);
    expect(email.runs.send_email).toHaveLength(1);
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
    expect(weatherRuns).toHaveLength(1);

    for (const { receipt } of [first, second]) {
      expectReplayOfSource(receipt, source.id, sourceReceipt, { mode: "exact" });
    }
    const docs = [first, second].map((r) => JSON.parse(r.receipt.documentJson));
    for (const doc of docs) {
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
    // override it declares, the mode that says why, and the tokens: the
    // substituted answer reports no usage (the recorded one said 121 + 11).
    const paths = diffPaths(
      replayProjectionValue(first.receipt.documentJson),
      replayProjectionValue(overridden.receipt.documentJson),
    );
    expect(paths.sort()).toEqual(
      [
        "autonomy_budget.consumed.input_tokens",
        "autonomy_budget.consumed.output_tokens",
        "cost.provider_breakdown.0.input_tokens",
        "cost.provider_breakdown.0.output_tokens",
        "deltas.0",
        "metadata.trellis.replay_mode",
        "replay_input.materials.0.metadata.mode",
        "replay_input.materials.2",
      ].sort(),
    );
    expect(doc.cost.provider_breakdown[0]).toMatchObject({ input_tokens: 82, output_tokens: 17 });
  }, 120_000);

  it("puts the harness's model, tokens, priced cost and tool output hashes in the receipts; replays cost nothing", async () => {
    const sourceDoc = JSON.parse((await receiptOf(source.id)).documentJson);
    expect(validate(sourceDoc)).toEqual([]);
    expect(sourceDoc.model_route.chosen_model).toEqual({
      provider: "openai",
      model: "gpt-4o-mini-2024-07-18",
    });
    // Two model calls: 82 + 121 prompt tokens, 17 + 11 completion tokens, at the configured price.
    const usd = (203 * PRICE.input_usd_per_mtok + 28 * PRICE.output_usd_per_mtok) / 1e6;
    expect(sourceDoc.cost.currency).toBe("USD");
    expect(sourceDoc.cost.total).toBeCloseTo(usd, 12);
    expect(sourceDoc.cost.provider_breakdown).toEqual([
      {
        provider: "openai",
        model: "gpt-4o-mini-2024-07-18",
        amount: expect.closeTo(usd, 12),
        input_tokens: 203,
        output_tokens: 28,
        metadata: {
          pricing: "price_table",
          pricing_note: expect.any(String),
          price_keys: ["openai/gpt-4o-mini*"],
        },
      },
    ]);
    expect(sourceDoc.autonomy_budget.consumed).toMatchObject({
      input_tokens: 203,
      output_tokens: 28,
    });
    // The tool call's output hash is the hash of the result the model got.
    const toolMessage = (await messagesOf(sourceSession)).find((m) => m.toolCallId !== "");
    const output =
      toolMessage?.parts[0]?.kind.case === "text" ? toolMessage.parts[0].kind.value.text : "";
    expect(JSON.parse(output)).toMatchObject({ checkedAt: CLOCK.toISOString(), authorized: true });
    expect(sourceDoc.side_effects.tool_calls).toEqual([
      {
        tool: "get_weather",
        call_id: toolMessage?.toolCallId,
        status: "succeeded",
        input_hash: sha256({ city: "Paris" }),
        output_hash: textSha256(output),
      },
    ]);
    // The secret was read, but only its fingerprint was recorded; the receipt holds neither.
    expect(sourceDoc.side_effects.tool_calls[0].output_hash).toBe(sha256(output));
    expect(JSON.stringify(sourceDoc)).not.toContain(SECRET);

    // A replay names the same model and tokens; it called no provider, so it cost nothing.
    const exact = await replay(ReplayMode.EXACT);
    const doc = JSON.parse(exact.receipt.documentJson);
    expect(validate(doc)).toEqual([]);
    expect(doc.model_route.chosen_model).toEqual(sourceDoc.model_route.chosen_model);
    expect(doc.cost).toEqual({
      currency: "USD",
      total: 0,
      provider_breakdown: [
        {
          provider: "openai",
          model: "gpt-4o-mini-2024-07-18",
          amount: 0,
          input_tokens: 203,
          output_tokens: 28,
          metadata: { pricing: "replayed", pricing_note: expect.any(String) },
        },
      ],
    });
    expect(doc.side_effects.tool_calls[0].output_hash).toBe(textSha256(output));
  }, 120_000);

  it("replays an approval-gated task from its checkpoint; the receipt references the checkpoint", async () => {
    const sourceReceipt = await receiptOf(approved.id);
    const sourceDoc = JSON.parse(sourceReceipt.documentJson);
    expect(sourceDoc.approvals).toEqual([expect.objectContaining({ decision: "approved" })]);
    const { events } = await c.events.listEvents({ taskId: approved.id, limit: 1000 });
    const boundary = events.find((e) => e.kind === "task.input_required");
    expect(boundary).toBeDefined();

    const resumed = await replay(
      ReplayMode.FROM_CHECKPOINT,
      {},
      {
        taskId: approved.id,
        checkpointId,
      },
    );
    // The approved call was not sent again: its recorded result was used.
    expect(email.runs.send_email).toHaveLength(1);
    const original = await messagesOf(approvedSession);
    const replayed = await messagesOf(resumed.sessionId);
    expect(replayed.map(comparable)).toEqual(original.map(comparable));

    expectReplayOfSource(resumed.receipt, approved.id, sourceReceipt, {
      source_task_id: approved.id,
      mode: "from_checkpoint",
      checkpoint_id: checkpointId,
      checkpoint_event_id: boundary?.id,
    });
    const doc = JSON.parse(resumed.receipt.documentJson);
    expect(doc.metadata.trellis).toMatchObject({
      replay_of: approved.id,
      replay_mode: "from_checkpoint",
    });
    expect(doc.deltas).toEqual([]);
    // Only what followed the checkpoint was produced by the replay: the sent email and the answer.
    const emailMessage = original.find((m) => m.toolCallId !== "");
    const emailText =
      emailMessage?.parts[0]?.kind.case === "text" ? emailMessage.parts[0].kind.value.text : "";
    expect(doc.side_effects.tool_calls).toEqual([
      expect.objectContaining({
        tool: "send_email",
        status: "succeeded",
        output_hash: textSha256(emailText),
      }),
    ]);
    expect(doc.model_route.chosen_model).toEqual({
      provider: "openai",
      model: "gpt-4o-mini-2024-07-18",
    });
  }, 120_000);

  it("applies time: and secret: overrides to a deterministic tool's reads, one delta each, no secret value anywhere", async () => {
    const later = "2027-01-01T00:00:00Z";
    const rotated = "rotated-key-never-in-receipts";
    const before = weatherRuns.length;
    const overridden = await replay(
      ReplayMode.WITH_OVERRIDES,
      {
        "time:checked_at": { value: fromJson(ValueSchema, later) },
        "secret:WEATHER_API_KEY": { value: fromJson(ValueSchema, rotated) },
      },
      { reason: "clock moved, key rotated" },
    );
    // The tool ran again (it is deterministic), with the overrides; no provider was called.
    expect(weatherRuns.slice(before)).toEqual([
      { city: "Paris", checkedAt: new Date(later).toISOString(), authorized: false },
    ]);
    const replayed = await messagesOf(overridden.sessionId);
    const tool = replayed.find((m) => m.toolCallId !== "");
    const metadata = (tool?.metadata ?? {}) as JsonObject;
    expect(metadata["time:checked_at"]).toMatchObject({ value: new Date(later).toISOString() });
    // The re-run's read is recorded with the deployment's fingerprint of the override.
    expect(metadata["secret:WEATHER_API_KEY"]).toEqual({
      kind: "secret_value",
      name: "WEATHER_API_KEY",
      set: true,
      fingerprint: fingerprintOf(rotated),
      tool_call_id: tool?.toolCallId,
    });
    expect(fingerprintOf(rotated)).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);

    const doc = JSON.parse(overridden.receipt.documentJson);
    expect(validate(doc)).toEqual([]);
    expect(doc.replay_input.determinism).toBe("byte_deterministic");
    expect(doc.replay_input.materials[0].metadata.unused_override_keys).toEqual([]);
    const deltas = [...doc.deltas].sort((a, b) => a.override_key.localeCompare(b.override_key));
    expect(deltas).toEqual([
      {
        // The schema's deltas take sha256: digests only; a secret has none to show.
        delta_id: `${overridden.task.id}:secret:WEATHER_API_KEY`,
        operation: "replace",
        path: "metadata.secret:WEATHER_API_KEY.fingerprint",
        override_key: "secret:WEATHER_API_KEY",
        event_id: expect.any(String),
        before_sha256: null,
        after_sha256: null,
        reason: "clock moved, key rotated",
      },
      {
        delta_id: `${overridden.task.id}:time:checked_at`,
        operation: "replace",
        path: "metadata.time:checked_at.value",
        override_key: "time:checked_at",
        event_id: expect.any(String),
        before_sha256: sha256(CLOCK.toISOString()),
        after_sha256: sha256(later),
        reason: "clock moved, key rotated",
      },
    ]);
    // The secret override's material names its fingerprint; the time override's its hash.
    const materials = doc.replay_input.materials as JsonObject[];
    const secretMaterial = materials.find((m) => m.id === "secret:WEATHER_API_KEY");
    expect(secretMaterial).toEqual({
      kind: "host_fact",
      id: "secret:WEATHER_API_KEY",
      metadata: {
        role: "replay_override",
        override_key: "secret:WEATHER_API_KEY",
        override_kind: "secret_value",
        fingerprint: fingerprintOf(rotated),
        visibility: "receipt_only",
      },
    });
    expect(materials.find((m) => m.id === "time:checked_at")).toMatchObject({
      sha256: sha256(later),
    });
    // Neither secret value nor its plain hash (nor the source secret's) is in the
    // replay's messages, events or receipt.
    const recorded = await everythingOf(overridden);
    for (const [where, text] of Object.entries(recorded)) {
      for (const forbidden of [rotated, SECRET, sha256(rotated), sha256(SECRET)]) {
        const bare = forbidden.replace(/^sha256:/, "");
        expect(text.includes(bare), `${where} holds ${forbidden}`).toBe(false);
      }
    }
    // The source recorded its read by fingerprint too.
    const sourceTool = (await messagesOf(sourceSession)).find((m) => m.toolCallId !== "");
    expect(sourceTool?.metadata?.["secret:WEATHER_API_KEY"]).toMatchObject({
      set: true,
      fingerprint: fingerprintOf(SECRET),
    });
    expect(JSON.stringify(sourceTool?.metadata)).not.toContain(sha256(SECRET).slice(7));
    const sourceDoc = JSON.parse((await receiptOf(source.id)).documentJson);
    expect(doc.side_effects.tool_calls[0].output_hash).not.toBe(
      sourceDoc.side_effects.tool_calls[0].output_hash,
    );
  }, 120_000);

  it("fails a re-run that needs a secret only the fingerprint of was recorded, naming it (receipt: unavailable)", async () => {
    const before = weatherRuns.length;
    const { task } = await c.tasks.replayTask({
      taskId: source.id,
      mode: ReplayMode.WITH_OVERRIDES,
      reason: "clock only",
      overrides: { "time:checked_at": { value: fromJson(ValueSchema, "2027-06-01T00:00:00Z") } },
    });
    const done = await settle(task?.id as string);
    expect(done.status).toBe(TaskStatus.FAILED);
    expect(done.failure?.category).toBe("replay_dependency_unavailable");
    expect(done.failure?.message).toContain("secret:WEATHER_API_KEY");
    // The tool started again (it read the overridden clock) but got no secret.
    expect(weatherRuns).toHaveLength(before);
    const doc = JSON.parse((await receiptOf(done.id)).documentJson);
    expect(validate(doc)).toEqual([]);
    expect(doc.replay_input.determinism).toBe("unavailable");
    // (The receipt's redactor takes "secret:<name>" for a credential pair and masks it.)
    expect(doc.replay_input.unavailable_reason).toContain("secret WEATHER_API_KEY");
  }, 120_000);

  it("still replays a source recorded before fingerprints (a secret's plain sha256), showing no new plain hash", async () => {
    // Rewrite the source's secret read to the old record shape, as an old session has it.
    const db = trellis.contexts.get("tasks")?.db.kysely;
    if (!db) throw new Error("the tasks service is not running");
    const row = await sql<{ output: Uint8Array }>`
      select output from tasks.tasks where id = ${source.id}`.execute(db);
    const original = row.rows[0]?.output as Uint8Array;
    const legacy = decodeMessages(original).map((message) => {
      const record = message.metadata?.["secret:WEATHER_API_KEY"] as JsonObject | undefined;
      if (!record) return message;
      const { fingerprint: _dropped, ...rest } = record;
      const copy = clone(MessageSchema, message);
      copy.metadata = {
        ...(message.metadata ?? {}),
        "secret:WEATHER_API_KEY": { ...rest, sha256: textSha256(SECRET) },
      };
      return copy;
    });
    await sql`update tasks.tasks set output = ${encodeMessages(legacy)} where id = ${source.id}`.execute(
      db,
    );
    try {
      const rotated = "rotated-again-never-hashed-plainly";
      const overridden = await replay(
        ReplayMode.WITH_OVERRIDES,
        { "secret:WEATHER_API_KEY": { value: fromJson(ValueSchema, rotated) } },
        { reason: "old session, new key" },
      );
      const doc = JSON.parse(overridden.receipt.documentJson);
      expect(validate(doc)).toEqual([]);
      // The old record's hash is the "before" (the source shows it already); the override has none.
      expect(doc.deltas).toEqual([
        {
          delta_id: `${overridden.task.id}:secret:WEATHER_API_KEY`,
          operation: "replace",
          path: "metadata.secret:WEATHER_API_KEY.sha256",
          override_key: "secret:WEATHER_API_KEY",
          event_id: expect.any(String),
          before_sha256: textSha256(SECRET),
          after_sha256: null,
          reason: "old session, new key",
        },
      ]);
      const tool = (await messagesOf(overridden.sessionId)).find((m) => m.toolCallId !== "");
      expect(tool?.metadata?.replay).toMatchObject({
        override_key: "secret:WEATHER_API_KEY",
        override: {
          before_sha256: textSha256(SECRET),
          after_sha256: null,
          before_fingerprint: null,
          after_fingerprint: fingerprintOf(rotated),
        },
      });
      const recorded = await everythingOf(overridden);
      for (const [where, text] of Object.entries(recorded)) {
        expect(text.includes(rotated), `${where} holds the value`).toBe(false);
        expect(text.includes(sha256(rotated).slice(7)), `${where} holds its hash`).toBe(false);
      }
    } finally {
      await sql`update tasks.tasks set output = ${original} where id = ${source.id}`.execute(db);
    }
  }, 120_000);
});
