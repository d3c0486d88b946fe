import { describe, expect, it } from "vitest";
import { paramsStage } from "../../src/http/pipeline/params.js";
import { exchangeOf, recorder, route } from "./support.js";

describe("stage params", () => {
  it("passes plain path parameters and query values on", async () => {
    const { next, reached } = recorder();
    const exchange = exchangeOf(route(), {
      params: { session_id: "ses_1" },
      url: "/v1/sessions/ses_1?cursor=evt_2&limit=5",
    });
    await paramsStage(next)(exchange);
    expect(reached).toHaveLength(1);
  });

  it("refuses control characters in a path parameter, a query value or name", async () => {
    const { next, reached } = recorder();
    const cases = [
      { params: { session_id: "ses\u00001" }, param: "session_id" },
      { url: "/v1/sessions/ses_1?cursor=a%0Ab", param: "cursor" },
      { url: "/v1/sessions/ses_1?a%7Fb=1", param: "a\u007fb" },
    ];
    for (const { param, ...request } of cases) {
      await expect(paramsStage(next)(exchangeOf(route(), request))).rejects.toMatchObject({
        reason: "invalid_request",
        param,
      });
    }
    expect(reached).toHaveLength(0);
  });
});
