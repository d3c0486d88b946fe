import { loadConfig, TrellisError } from "@trellis/runtime";
import { DEFAULT_CHECKPOINT_INTERVAL_MS, DEFAULT_CHECKPOINT_WAL_BYTES } from "@trellis/storage";
import { describe, expect, it } from "vitest";
import { devConfigSchema } from "../src/cli/dev-server.js";

describe("embedded database maintenance settings", () => {
  it("defaults to a checkpoint per 64 MiB of WAL or 5 minutes, and vacuum on", () => {
    const config = loadConfig(devConfigSchema, {});
    expect(config.TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB).toBe(64);
    expect(config.TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL).toBe(300_000);
    expect(config.TRELLIS_EMBEDDED_VACUUM).toBe(true);
    // The CLI reads storage's defaults from `@trellis/storage/defaults`.
    expect(config.TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB * 1024 * 1024).toBe(
      DEFAULT_CHECKPOINT_WAL_BYTES,
    );
    expect(config.TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL).toBe(DEFAULT_CHECKPOINT_INTERVAL_MS);
  });

  it("takes sizes, durations and 0 for off", () => {
    const config = loadConfig(devConfigSchema, {
      TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB: "0",
      TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL: "0",
      TRELLIS_EMBEDDED_VACUUM: "off",
    });
    expect(config.TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB).toBe(0);
    expect(config.TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL).toBe(0);
    expect(config.TRELLIS_EMBEDDED_VACUUM).toBe(false);
    const other = loadConfig(devConfigSchema, {
      TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB: "256",
      TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL: "1m30s",
    });
    expect(other.TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB).toBe(256);
    expect(other.TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL).toBe(90_000);
  });

  it.each([
    ["TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB", "64MB"],
    ["TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB", "-1"],
    ["TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB", "1.5"],
    ["TRELLIS_EMBEDDED_CHECKPOINT_WAL_MB", "100000"],
    ["TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL", "often"],
    ["TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL", "-5m"],
    ["TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL", "2d"],
    ["TRELLIS_EMBEDDED_CHECKPOINT_INTERVAL", "25h"],
    ["TRELLIS_EMBEDDED_VACUUM", "sometimes"],
  ])("refuses %s=%j with config_invalid naming it", (name, raw) => {
    let thrown: unknown;
    try {
      loadConfig(devConfigSchema, { [name]: raw });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(TrellisError);
    expect((thrown as TrellisError).reason).toBe("config_invalid");
    expect((thrown as Error).message).toContain(name);
  });
});
