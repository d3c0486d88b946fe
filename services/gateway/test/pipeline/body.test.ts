import { describe, expect, it } from "vitest";
import { bodyStage } from "../../src/http/pipeline/body.js";
import { exchangeOf, recorder, route } from "./support.js";

const limits = { maxBytes: 64, maxDepth: 4 };

describe("stage body", () => {
  it("reads a write's JSON body into the call", async () => {
    const { next, reached } = recorder();
    const exchange = exchangeOf(route({ method: "POST" }), {
      headers: { "content-type": "application/json" },
      body: '{"a":[1,{"b":null}]}',
    });
    await bodyStage(limits)(next)(exchange);
    expect(reached).toHaveLength(1);
    expect(exchange.call.body).toEqual({ a: [1, { b: null }] });
  });

  it("leaves an empty write's body undefined and reads nothing of a GET", async () => {
    const { next } = recorder();
    const empty = exchangeOf(route({ method: "POST" }));
    await bodyStage(limits)(next)(empty);
    expect(empty.call.body).toBeUndefined();
    const read = exchangeOf(route(), { body: '{"ignored":true}' });
    await bodyStage(limits)(next)(read);
    expect(read.call.body).toBeUndefined();
  });

  it("refuses a body over the limit (413), too deep or malformed (400)", async () => {
    const { next, reached } = recorder();
    const post = (body: string) => exchangeOf(route({ method: "POST" }), { body });
    await expect(bodyStage(limits)(next)(post(`"${"x".repeat(100)}"`))).rejects.toMatchObject({
      reason: "payload_too_large",
    });
    await expect(bodyStage(limits)(next)(post("[[[[[[1]]]]]]"))).rejects.toMatchObject({
      reason: "invalid_request",
    });
    await expect(bodyStage(limits)(next)(post("{bad"))).rejects.toMatchObject({
      reason: "invalid_request",
    });
    expect(reached).toHaveLength(0);
  });
});
