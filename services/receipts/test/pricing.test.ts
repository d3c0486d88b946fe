// Model call cost in receipts (README "Content mapping", src/domain/pricing.ts):
// reported by the adapter, priced from TRELLIS_RECEIPT_MODEL_PRICES, or 0 with
// `pricing: unknown` — and the harness's tool records (status, output hash).
import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { ActorKind, type Event, EventSchema, MessageSchema, Role } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { loadReceiptsConfig } from "../src/config.js";
import { buildTaskReceipt, sealReceipt } from "../src/domain/build.js";
import { eventHash } from "../src/domain/canonical.js";
import { extractFacts, foldTaskFacts } from "../src/domain/facts.js";
import { type PriceTable, parsePriceTable, priceOf } from "../src/domain/pricing.js";
import { issuer, newKey } from "../src/testing/receipt-helpers.js";
import { receiptSchemaValidator, taskEvents } from "./support.js";

const OUTPUT_HASH = `sha256:${"e".repeat(64)}`;

/** A task whose events are the usual lifecycle plus `extra` before its end. */
function withEvents(taskId: string, extra: { kind: string; payload: Event["payload"] }[]): Event[] {
  const base = taskEvents({ taskId, sequenced: true });
  const added = extra.map((e) =>
    create(EventSchema, {
      kind: e.kind,
      resource: { object: "task", id: taskId },
      taskId,
      actor: { id: "agent_h", kind: ActorKind.AGENT },
      ...(e.payload ? { payload: e.payload } : {}),
    }),
  );
  const all = [...base.slice(0, -1), ...added, base.at(-1) as Event];
  return all.map((event, i) =>
    create(EventSchema, {
      kind: event.kind,
      resource: { object: "task", id: taskId },
      taskId,
      workspaceId: "default",
      sessionId: `ses_${taskId}`,
      id: `evt_${taskId}_${i + 1}`,
      sequence: BigInt(i + 1),
      createdAt: timestampFromDate(new Date(Date.UTC(2026, 10, 22, 10, 0, i + 1))),
      ...(event.actor ? { actor: event.actor } : {}),
      ...(event.payload ? { payload: event.payload } : {}),
    }),
  );
}

function modelCall(data: JsonObject) {
  return {
    kind: "agent.model_call",
    payload: create(EventSchema, { payload: { kind: { case: "data", value: data } } }).payload,
  };
}

const key = newKey("key_pricing");

/** The sealed receipt document of a task's events. */
function receipt(events: Event[], prices?: PriceTable) {
  const taskId = events[0]?.taskId as string;
  const summary = foldTaskFacts(
    taskId,
    events.map((event) => ({
      eventId: event.id,
      eventHash: eventHash(event),
      facts: extractFacts(event, taskId),
    })),
  );
  const unsigned = buildTaskReceipt({
    receiptId: `rcpt_${taskId}`,
    issuedAt: new Date("2026-11-22T11:00:00Z"),
    issuer,
    keyId: key.keyId,
    workspaceId: "default",
    sessionId: `ses_${taskId}`,
    summary,
    agent: { agentId: "agent_h", backend: "harness" },
    policy: "required",
    streamComplete: true,
    ...(prices ? { prices } : {}),
  });
  return sealReceipt(unsigned, { previousHash: null, key, signedAt: new Date() }).document;
}

const harnessCalls = [
  modelCall({
    step: 1,
    call_id: "main:1",
    provider: "openai",
    model: "gpt-4o-mini-2024-07-18",
    input_tokens: 1000,
    output_tokens: 200,
  }),
  modelCall({
    step: 2,
    call_id: "main:2",
    provider: "openai",
    model: "gpt-4o-mini-2024-07-18",
    input_tokens: 3000,
    output_tokens: 100,
  }),
  modelCall({
    step: 1,
    call_id: "main:1",
    provider: "anthropic",
    model: "claude-sonnet-5-5",
    input_tokens: 10,
    output_tokens: 5,
  }),
];

describe("model call cost in receipts", () => {
  const validate = receiptSchemaValidator();
  const table = parsePriceTable(
    JSON.stringify({
      "openai/gpt-4o-mini*": { input_usd_per_mtok: 0.15, output_usd_per_mtok: 0.6 },
      "openai/gpt-4o-mini-2024-07-18": { input_usd_per_mtok: 0.2, output_usd_per_mtok: 0.8 },
      "openai/gpt-4o*": { input_usd_per_mtok: 5, output_usd_per_mtok: 15 },
    }),
  );

  it("prices tokens from the table (exact key first, else the longest prefix), the rest unknown at 0", () => {
    expect(priceOf(table, "openai", "gpt-4o-mini-2024-07-18")?.key).toBe(
      "openai/gpt-4o-mini-2024-07-18",
    );
    expect(priceOf(table, "openai", "gpt-4o-mini-2025-01-01")?.key).toBe("openai/gpt-4o-mini*");
    expect(priceOf(table, "openai", "gpt-4o-2024-08-06")?.key).toBe("openai/gpt-4o*");
    expect(priceOf(table, "anthropic", "claude-sonnet-5-5")).toBeUndefined();

    const doc = receipt(withEvents("task_priced", harnessCalls), table);
    expect(validate(doc)).toEqual([]);
    const openai = (4000 * 0.2 + 300 * 0.8) / 1e6;
    expect(doc.cost.provider_breakdown).toEqual([
      {
        provider: "openai",
        model: "gpt-4o-mini-2024-07-18",
        amount: expect.closeTo(openai, 12),
        input_tokens: 4000,
        output_tokens: 300,
        metadata: {
          pricing: "price_table",
          pricing_note: expect.stringContaining("TRELLIS_RECEIPT_MODEL_PRICES"),
          price_keys: ["openai/gpt-4o-mini-2024-07-18"],
        },
      },
      {
        provider: "anthropic",
        model: "claude-sonnet-5-5",
        amount: 0,
        input_tokens: 10,
        output_tokens: 5,
        metadata: { pricing: "unknown", pricing_note: expect.stringContaining("no price") },
      },
    ]);
    expect(doc.cost.total).toBeCloseTo(openai, 12);
    // The last call names the route.
    expect(doc.model_route.chosen_model).toEqual({
      provider: "anthropic",
      model: "claude-sonnet-5-5",
    });
    expect(doc.autonomy_budget.consumed).toMatchObject({ input_tokens: 4010, output_tokens: 305 });
  });

  it("says pricing unknown (cost 0) without a table, and mixed when some calls reported a cost", () => {
    const unpriced = receipt(withEvents("task_unpriced", harnessCalls.slice(0, 1)));
    expect(validate(unpriced)).toEqual([]);
    expect(unpriced.cost.total).toBe(0);
    expect(unpriced.cost.provider_breakdown[0]?.metadata).toMatchObject({ pricing: "unknown" });

    const mixed = receipt(
      withEvents("task_mixed", [
        harnessCalls[0] as ReturnType<typeof modelCall>,
        modelCall({
          provider: "openai",
          model: "gpt-4o-mini-2024-07-18",
          input_tokens: 1,
          output_tokens: 1,
          cost_usd: 0.5,
        }),
      ]),
    );
    expect(validate(mixed)).toEqual([]);
    expect(mixed.cost.provider_breakdown[0]).toMatchObject({
      amount: 0.5,
      metadata: { pricing: "mixed", pricing_sources: ["reported", "unknown"] },
    });
  });

  it("reads the harness's tool records: status and output hash, never the output", () => {
    const toolMessage = (id: string, record: JsonObject) => ({
      kind: "agent.message",
      payload: create(EventSchema, {
        payload: {
          kind: {
            case: "messageAppended",
            value: {
              message: create(MessageSchema, {
                role: Role.TOOL,
                toolCallId: id,
                parts: [{ kind: { case: "text", value: { text: "secret output text" } } }],
                metadata: { [`tool:${id}`]: { kind: "tool_result", tool_call_id: id, ...record } },
              }),
            },
          },
        },
      }).payload,
    });
    const doc = receipt(
      withEvents("task_tools", [
        toolMessage("call_ok", {
          name: "get_weather",
          status: "ok",
          output: "sunny",
          output_sha256: OUTPUT_HASH,
        }),
        toolMessage("call_err", { name: "get_weather", status: "error", output: "Error: boom" }),
        toolMessage("call_denied", { name: "send_email", status: "denied" }),
        toolMessage("call_bad", { name: "send_email", status: "rejected", problems: [] }),
      ]),
    );
    expect(validate(doc)).toEqual([]);
    expect(doc.side_effects.tool_calls).toEqual([
      { tool: "get_weather", call_id: "call_ok", status: "succeeded", output_hash: OUTPUT_HASH },
      {
        tool: "get_weather",
        call_id: "call_err",
        status: "failed",
        output_hash: expect.stringMatching(/^sha256:[0-9a-f]{64}$/),
      },
      { tool: "send_email", call_id: "call_denied", status: "canceled" },
      { tool: "send_email", call_id: "call_bad", status: "failed" },
    ]);
    expect(JSON.stringify(doc)).not.toContain("secret output text");
  });

  it("refuses a malformed TRELLIS_RECEIPT_MODEL_PRICES, naming it", () => {
    for (const bad of [
      "not json",
      "[]",
      '{"gpt-4o": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}',
      '{"openai/x": {"input_usd_per_mtok": -1, "output_usd_per_mtok": 1}}',
      '{"openai/x": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1, "per_call": 2}}',
    ]) {
      let error: unknown;
      try {
        loadReceiptsConfig({ TRELLIS_RECEIPT_MODEL_PRICES: bad });
      } catch (e) {
        error = e;
      }
      expect(isTrellisError(error) && error.reason, bad).toBe("config_invalid");
      expect(String((error as Error).message)).toContain("TRELLIS_RECEIPT_MODEL_PRICES");
    }
    const config = loadReceiptsConfig({
      TRELLIS_RECEIPT_MODEL_PRICES:
        '{"openai/x*": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 2}}',
    });
    expect(priceOf(config.prices, "openai", "x-1")?.price).toEqual({
      inputUsdPerMTok: 1,
      outputUsdPerMTok: 2,
    });
  });
});
