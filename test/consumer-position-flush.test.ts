import { DEFAULT_CONSUMER_POSITION_FLUSH_MS, DEFAULT_EVENT_WINDOW } from "@trellis/platform";
import { loadConfig, TrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { devConfigSchema as serverSchema } from "../src/cli/dev-server.js";
import { devConfigSchema } from "../src/cli/settings.js";

describe("TRELLIS_CONSUMER_POSITION_FLUSH", () => {
  it("writes durable-consumer positions at most once a second by default", () => {
    expect(DEFAULT_CONSUMER_POSITION_FLUSH_MS).toBe(1_000);
    expect(loadConfig(devConfigSchema, {}).TRELLIS_CONSUMER_POSITION_FLUSH).toBe(1_000);
    const flush = (raw: string) =>
      loadConfig(devConfigSchema, { TRELLIS_CONSUMER_POSITION_FLUSH: raw })
        .TRELLIS_CONSUMER_POSITION_FLUSH;
    expect(flush("0")).toBe(0);
    expect(flush("100ms")).toBe(100);
  });

  it("defaults, in trellis dev's light settings, to what the platform uses", () => {
    // settings.ts takes them from the light `defaults` entry points.
    expect(serverSchema).toBe(devConfigSchema);
    const defaults = loadConfig(devConfigSchema, {});
    expect(defaults.TRELLIS_CONSUMER_POSITION_FLUSH).toBe(DEFAULT_CONSUMER_POSITION_FLUSH_MS);
    expect(defaults.TRELLIS_EVENT_WINDOW).toBe(DEFAULT_EVENT_WINDOW);
  });

  it.each(["often", "-1s", "2m"])("refuses %j with config_invalid naming it", (raw) => {
    let thrown: unknown;
    try {
      loadConfig(devConfigSchema, { TRELLIS_CONSUMER_POSITION_FLUSH: raw });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TrellisError);
    expect((thrown as TrellisError).reason).toBe("config_invalid");
    expect((thrown as Error).message).toContain("TRELLIS_CONSUMER_POSITION_FLUSH");
  });
});
