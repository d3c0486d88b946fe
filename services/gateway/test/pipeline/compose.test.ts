// The REST pipeline composes stages like interceptors: outermost first, each
// wrapping the rest, the route's handler last.
import { describe, expect, it } from "vitest";
import { jsonResponse } from "../../src/http/io.js";
import { compose, routeStage, type Stage } from "../../src/http/pipeline/stage.js";
import { exchangeOf, route } from "./support.js";

describe("compose", () => {
  it("runs stages in order around the route, and a stage may answer instead", async () => {
    const trace: string[] = [];
    const named =
      (name: string): Stage =>
      (next) =>
      async (exchange) => {
        trace.push(`${name} in`);
        const outcome = await next(exchange);
        trace.push(`${name} out`);
        return outcome;
      };
    const spec = route({
      handle: async () => {
        trace.push("route");
        return jsonResponse(201, {});
      },
    });
    const pipeline = compose([named("a"), named("b")], routeStage);
    expect((await pipeline(exchangeOf(spec)))?.status).toBe(201);
    expect(trace).toEqual(["a in", "b in", "route", "b out", "a out"]);

    trace.length = 0;
    const refuse: Stage = () => async () => jsonResponse(403, {});
    const refused = compose([named("a"), refuse, named("b")], routeStage);
    expect((await refused(exchangeOf(spec)))?.status).toBe(403);
    expect(trace).toEqual(["a in", "a out"]);
  });

  it("is the route alone without stages", async () => {
    const pipeline = compose([], routeStage);
    expect((await pipeline(exchangeOf(route())))?.status).toBe(200);
  });
});
