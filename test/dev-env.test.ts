// `trellis dev` on loopback lets webhooks reach the developer's own machine;
// on any other address, or when the variable is set, the guard is as configured.
import { describe, expect, it } from "vitest";
import { devEnv } from "../src/cli/dev-server.js";

describe("trellis dev environment", () => {
  it("allows private webhook targets when bound to loopback, unless told otherwise", () => {
    for (const host of ["127.0.0.1", "localhost", "::1"]) {
      expect(devEnv({}, host).TRELLIS_WEBHOOKS_ALLOW_PRIVATE).toBe("1");
    }
    expect(devEnv({ TRELLIS_WEBHOOKS_ALLOW_PRIVATE: "false" }, "127.0.0.1")).toEqual({
      TRELLIS_WEBHOOKS_ALLOW_PRIVATE: "false",
    });
  });

  it("keeps the guard on other addresses", () => {
    for (const host of ["0.0.0.0", "10.0.0.5", "::"]) {
      expect(devEnv({ OTHER: "x" }, host)).toEqual({ OTHER: "x" });
    }
  });
});
