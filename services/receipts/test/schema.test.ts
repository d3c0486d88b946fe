// Every receipt Trellis issues validates against the spec's JSON Schema
// (receipt-2026-04-25, draft 2020-12); the spec's fixtures behave as labelled.
import { describe, expect, it } from "vitest";
import { buildApprovalReceipt, sealReceipt } from "../src/domain/build.js";
import { eventHash, extractFacts, foldTaskFacts } from "../src/index.js";
import { issuer, newKey, receiptOf } from "../src/testing/receipt-helpers.js";
import { readSpecJson, receiptSchemaValidator, taskEvents } from "./support.js";

describe("receipt JSON Schema", () => {
  const validate = receiptSchemaValidator();
  const key = newKey("key_test");

  it("accepts the spec's valid fixture", () => {
    expect(validate(readSpecJson("fixtures/valid/task-receipt.json"))).toEqual([]);
  });

  it("rejects the spec's invalid fixture (no chain.receipt_hash)", () => {
    const errors = validate(readSpecJson("fixtures/invalid/missing-chain-hash.json"));
    expect(errors.length).toBeGreaterThan(0);
    expect(errors.join("\n")).toMatch(/receipt_hash/);
  });

  it("accepts every kind of task receipt Trellis issues", () => {
    for (const final of ["COMPLETED", "FAILED", "CANCELED"] as const) {
      for (const extras of [{}, { withTool: true, withModel: true }]) {
        const sealed = receiptOf(
          taskEvents({ taskId: `task_${final}`, final, sequenced: true, ...extras }),
          key,
          `sha256:${"a".repeat(64)}`,
        );
        expect(validate(JSON.parse(sealed.text))).toEqual([]);
      }
    }
  });

  it("accepts receipts built with unknown agents and gapped streams", () => {
    const events = taskEvents({ taskId: "task_gap", withTool: true, sequenced: true });
    events.splice(3, 1);
    const sealed = receiptOf(events, key, null, {});
    const doc = JSON.parse(sealed.text);
    expect(validate(doc)).toEqual([]);
    expect(doc.replay_input.determinism).toBe("unavailable");
    expect(doc.chain.merkle_root).toBeUndefined();
  });

  it("maps the task status to final_state and keeps the task status in metadata", () => {
    const completed = receiptOf(taskEvents({ taskId: "task_ok", sequenced: true }), key).document;
    expect(completed.lifecycle.final_state).toBe("SUCCEEDED");
    expect(completed.metadata).toMatchObject({ trellis: { task_status: "COMPLETED" } });
    const failed = receiptOf(
      taskEvents({ taskId: "task_ko", final: "FAILED", sequenced: true }),
      key,
    ).document;
    expect(failed.lifecycle.final_state).toBe("FAILED");
    // Secrets in the failure never reach the receipt; descriptors do.
    const text = JSON.stringify(failed);
    expect(text).not.toContain("sk-secretsecretsecret");
    expect(text).not.toContain("abc.def-ghi");
    expect(failed.redactions?.map((r) => r.field)).toEqual([
      "/lifecycle/failure/metadata/api_key",
      "/lifecycle/failure/message",
    ]);
  });

  it("records tool calls, approvals, model route, cost and artifacts", () => {
    const doc = receiptOf(
      taskEvents({ taskId: "task_full", withTool: true, withModel: true, sequenced: true }),
      key,
    ).document;
    expect(doc.side_effects.tool_calls).toEqual([
      expect.objectContaining({ tool: "search", call_id: "call_1", status: "succeeded" }),
    ]);
    expect(doc.approvals).toEqual([
      expect.objectContaining({ actor: "user_1", action: "search", decision: "approved" }),
    ]);
    expect(doc.model_route.chosen_model).toEqual({
      provider: "openai",
      model: "gpt-test",
      version: "2026-01-01",
    });
    expect(doc.cost).toEqual({
      currency: "USD",
      total: 0.0123,
      provider_breakdown: [
        {
          provider: "openai",
          model: "gpt-test",
          amount: 0.0123,
          input_tokens: 1200,
          output_tokens: 300,
          metadata: {
            pricing: "reported",
            pricing_note: "cost reported by the execution adapter",
          },
        },
      ],
    });
    expect(doc.final_artifacts).toEqual([
      { artifact_id: "art_task_full", kind: "file", uri: "artifact://art_task_full" },
    ]);
    expect(doc.autonomy_budget.consumed.tool_calls).toBe(1);
    expect(doc.replay_input.determinism).toBe("byte_deterministic");
    expect(doc.chain.merkle_root).toMatch(/^sha256:[0-9a-f]{64}$/);
  });

  it("accepts approval receipts", () => {
    const events = taskEvents({ taskId: "task_appr", withTool: true, sequenced: true });
    const approvalEvent = events.find((e) => e.kind === "user.tool_confirmation")!;
    const records = events.map((e) => ({
      eventId: e.id,
      eventHash: eventHash(e),
      facts: extractFacts(e, "task_appr"),
    }));
    const facts = extractFacts(approvalEvent, "task_appr");
    const unsigned = buildApprovalReceipt({
      receiptId: "rcpt_appr",
      issuedAt: new Date(),
      issuer,
      keyId: key.keyId,
      workspaceId: "default",
      sessionId: approvalEvent.sessionId,
      eventId: approvalEvent.id,
      eventHash: eventHash(approvalEvent),
      decidedAt: facts.at,
      actor: "user_1",
      approval: facts.approval!,
      summary: foldTaskFacts("task_appr", records),
      agent: {},
      policy: "required",
    });
    const sealed = sealReceipt(unsigned, { previousHash: null, key, signedAt: new Date() });
    expect(validate(JSON.parse(sealed.text))).toEqual([]);
    expect(sealed.document.subject).toEqual({ object: "approval", id: approvalEvent.id });
    expect(sealed.document.approvals?.[0]?.decision).toBe("approved");
  });
});
