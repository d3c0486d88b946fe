// The model call hop of a turn's trace: the built-in harness opens one
// `trellis.model.call` span per call to its provider, child of whatever span
// runs the backend (trellis.adapter.run), run here against recorded OpenAI
// responses through the real SDK client.

import { createHarnessAdapter } from "@trellis/execution";
import {
  createTools,
  fixture,
  OPENAI_CHAT,
  type RecordedServer,
  recordedProviders,
  startRecordedServer,
  turnRequest,
} from "@trellis/execution/testing";
import { initTelemetry, type Telemetry, withSpan } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

describe("model call spans", () => {
  let server: RecordedServer;
  let telemetry: Telemetry;

  beforeAll(async () => {
    server = await startRecordedServer();
    telemetry = initTelemetry({ serviceName: "model-span-test", exporter: "memory" });
  });
  afterAll(async () => {
    await server.close();
    await telemetry.shutdown();
  });

  it("opens one client span per model call under the backend run", async () => {
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: createTools().tools,
    });
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
