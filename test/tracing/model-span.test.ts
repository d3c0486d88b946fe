// The model call hop of a turn's trace: the built-in harness opens one
// `trellis.model.call` span per call to its provider, child of whatever span
// runs the backend (trellis.adapter.run), run here against recorded OpenAI
// responses through the real SDK client.

import type { ExecutionAdapter } from "@trellis/execution";
import {
  createTools,
  enqueueChat,
  type RecordedServer,
  startRecordedHarness,
  turnRequest,
  weatherTurn,
} from "@trellis/execution/testing";
import { initTelemetry, type Telemetry, withSpan } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

describe("model call spans", () => {
  let server: RecordedServer;
  let adapter: ExecutionAdapter;
  let telemetry: Telemetry;

  beforeAll(async () => {
    telemetry = initTelemetry({ serviceName: "model-span-test", exporter: "memory" });
    ({ server, adapter } = await startRecordedHarness({ tools: createTools().tools }));
  });
  afterAll(async () => {
    await server?.close();
    await telemetry.shutdown();
  });

  it("opens one client span per model call under the backend run", async () => {
    enqueueChat(server, ...weatherTurn({ stream: false }));
    const { request } = turnRequest(
      { provider: "openai", model: "gpt-4o-mini", tools: ["get_weather"], stream: false },
      "What's the weather in Paris?",
    );
    const result = await withSpan("trellis.adapter.run", {}, () => adapter.execute(request));
    expect(result.status).toBe("completed");

    const spans = telemetry.memoryExporter?.getFinishedSpans() ?? [];
    const run = spans.find((s) => s.name === "trellis.adapter.run");
    const calls = spans.filter((s) => s.name === "trellis.model.call");
    // A tool call, then the final answer: two calls, in order, both under the run.
    expect(calls.map((s) => s.attributes["trellis.model_call_id"])).toEqual(["main:1", "main:2"]);
    for (const call of calls) {
      expect(call.parentSpanContext?.spanId).toBe(run?.spanContext().spanId);
      expect(call.spanContext().traceId).toBe(run?.spanContext().traceId);
      expect(call.attributes["gen_ai.provider.name"]).toBe("openai");
      expect(call.attributes["gen_ai.request.model"]).toBe("gpt-4o-mini");
    }
  });
});
