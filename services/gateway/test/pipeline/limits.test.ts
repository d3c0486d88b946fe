import { describe, expect, it } from "vitest";
import type { RouteLimits } from "../../src/http/context.js";
import { jsonResponse } from "../../src/http/io.js";
import { limitsStage } from "../../src/http/pipeline/limits.js";
import { exchangeOf, recorder, route } from "./support.js";

describe("stage limits", () => {
  it("runs the rest of the pipeline as the limits' work", async () => {
    const seen: string[] = [];
    const limits: Pick<RouteLimits, "limit"> = {
      limit: async (spec, _call, work) => {
        seen.push(`${spec.method} ${spec.path}`);
        const response = await work();
        seen.push(`settled ${response?.status}`);
        return response;
      },
    };
    const { next, reached } = recorder();
    const outcome = await limitsStage(limits)(next)(exchangeOf(route({ method: "POST" })));
    expect(outcome?.status).toBe(200);
    expect(reached).toHaveLength(1);
    expect(seen).toEqual(["POST /v1/sessions/{session_id}", "settled 200"]);
  });

  it("answers the limits' refusal without running the route", async () => {
    const limits: Pick<RouteLimits, "limit"> = {
      limit: async () => jsonResponse(429, { error: { code: "rate_limited" } }),
    };
    const { next, reached } = recorder();
    expect((await limitsStage(limits)(next)(exchangeOf(route())))?.status).toBe(429);
    expect(reached).toHaveLength(0);
  });

  it("is no stage without limits", () => {
    const { next } = recorder();
    expect(limitsStage(undefined)(next)).toBe(next);
  });
});
