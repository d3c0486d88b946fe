// The `context_compacted` envelope says which strategy wrote the summary: the
// model's (reused or fresh) or the deterministic one it fell back to.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { EventSchema } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import { UiProjector } from "../src/ui/projection/index.js";

function compacted(id: string, data: JsonObject) {
  return create(EventSchema, {
    id,
    kind: "context.compacted",
    sessionId: "ses_c",
    taskId: "task_c",
    workspaceId: "default",
    createdAt: timestampFromMs(Date.UTC(2026, 10, 22)),
    sequence: 1n,
    payload: { kind: { case: "data", value: data } },
  });
}

describe("context_compacted envelope", () => {
  it("carries the strategy used, and in debug the one asked for and why it fell back", () => {
    const projector = new UiProjector({ sessionId: "ses_c" });
    const [fallback] = projector.project(
      compacted("evt_1", {
        strategy: "first_line",
        requested_strategy: "model",
        summary_reused: false,
        fallback_reason: "provider_error: 500",
        summary: "Summary of the 2 earlier turns",
      }),
    );
    expect(fallback?.type).toBe("context_compacted");
    expect(fallback?.payload).toMatchObject({ strategy: "first_line", task_id: "task_c" });
    expect(fallback?.debug).toMatchObject({
      requested_strategy: "model",
      summary_reused: false,
      fallback_reason: "provider_error: 500",
    });
    const [model] = projector.project(
      compacted("evt_2", { strategy: "model", requested_strategy: "model", summary_reused: true }),
    );
    expect(model?.payload).toMatchObject({ strategy: "model" });
    expect(model?.debug).toMatchObject({ summary_reused: true, fallback_reason: null });
  });
});
