import { describe, expect, expectTypeOf, it } from "vitest";
import { env, loadConfig, parseDurationMs } from "../src/config.js";
import { isTrellisError, type TrellisError } from "../src/errors.js";

const schema = {
  DATABASE_URL: env.url({ protocols: ["postgres", "postgresql"] }),
  NATS_URL: env.url({ protocols: ["nats"] }).default("nats://127.0.0.1:4222"),
  PORT: env.port().default(8080),
  MODE: env.enum(["embedded", "production"]).default("embedded"),
  DEBUG: env.bool().default(false),
  SHUTDOWN_GRACE: env.duration().default(10_000),
  OPENAI_API_KEY: env.string().optional(),
  WORKERS: env.int({ min: 1, max: 64 }).optional(),
};

function configError(source: Record<string, string>): TrellisError {
  try {
    loadConfig(schema, source);
  } catch (error) {
    if (isTrellisError(error)) return error;
    throw error;
  }
  throw new Error("config was accepted");
}

describe("loadConfig", () => {
  it("parses, applies defaults and types the result", () => {
    const config = loadConfig(schema, {
      DATABASE_URL: "postgres://trellis@db:5432/trellis",
      PORT: "9090",
      MODE: "production",
      DEBUG: "yes",
      SHUTDOWN_GRACE: "1m30s",
      WORKERS: "",
    });
    expect(config).toEqual({
      DATABASE_URL: "postgres://trellis@db:5432/trellis",
      NATS_URL: "nats://127.0.0.1:4222",
      PORT: 9090,
      MODE: "production",
      DEBUG: true,
      SHUTDOWN_GRACE: 90_000,
      OPENAI_API_KEY: undefined,
      WORKERS: undefined,
    });
    expectTypeOf(config.PORT).toEqualTypeOf<number>();
    expectTypeOf(config.MODE).toEqualTypeOf<"embedded" | "production">();
    expectTypeOf(config.OPENAI_API_KEY).toEqualTypeOf<string | undefined>();
    expectTypeOf(config.DEBUG).toEqualTypeOf<boolean>();
    expect(Object.isFrozen(config)).toBe(true);
  });

  it("names the bad variable and what it expected", () => {
    const error = configError({ DATABASE_URL: "postgres://db/x", PORT: "http" });
    expect(error.reason).toBe("config_invalid");
    expect(error.param).toBe("PORT");
    expect(error.message).toBe(
      'invalid configuration: PORT must be an integer between 0 and 65535, got "http"',
    );
  });

  it("reports every problem at once, required variables included", () => {
    const error = configError({
      MODE: "staging",
      SHUTDOWN_GRACE: "soon",
      NATS_URL: "http://nats:4222",
      WORKERS: "0",
    });
    expect(error.metadata.variables).toBe("DATABASE_URL,NATS_URL,MODE,SHUTDOWN_GRACE,WORKERS");
    expect(error.message).toContain(
      "DATABASE_URL is required: set it to a URL with scheme postgres or postgresql",
    );
    expect(error.message).toContain("NATS_URL must be a URL with scheme nats");
    expect(error.message).toContain('MODE must be one of embedded, production, got "staging"');
    expect(error.message).toContain("SHUTDOWN_GRACE must be a duration such as 500ms, 10s, 1m30s");
    expect(error.message).toContain('WORKERS must be an integer between 1 and 64, got "0"');
  });

  it("never echoes secrets: secret-looking names, .secret() fields, URL passwords", () => {
    const secretSchema = {
      API_TOKEN: env.int(),
      SIGNING_MATERIAL: env.int().secret(),
      DATABASE_URL: env.url({ protocols: ["postgres"] }),
    };
    let message = "";
    try {
      loadConfig(secretSchema, {
        API_TOKEN: "sk-live-123",
        SIGNING_MATERIAL: "hunter2",
        DATABASE_URL: "mysql://admin:hunter3@db/x",
      });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain("API_TOKEN must be an integer, got a value (hidden)");
    expect(message).toContain("SIGNING_MATERIAL must be an integer, got a value (hidden)");
    expect(message).toContain('got "mysql://admin:***@db/x"');
    expect(message).not.toMatch(/sk-live|hunter/);
  });

  it("parses booleans and rejects other words", () => {
    const s = { FLAG: env.bool() };
    for (const [raw, value] of [
      ["true", true],
      ["ON", true],
      ["1", true],
      ["no", false],
      ["False", false],
      ["0", false],
    ] as const) {
      expect(loadConfig(s, { FLAG: raw }).FLAG).toBe(value);
    }
    expect(() => loadConfig(s, { FLAG: "maybe" })).toThrow(/FLAG must be a boolean/);
  });

  it("rejects non-integers and unsafe integers", () => {
    const s = { N: env.int() };
    for (const raw of ["1.5", "1e3", "0x10", "99999999999999999999", "12abc"]) {
      expect(() => loadConfig(s, { N: raw })).toThrow(/N must be an integer/);
    }
    expect(loadConfig(s, { N: "-42" }).N).toBe(-42);
  });
});

describe("parseDurationMs", () => {
  it("understands units, combinations and bare milliseconds", () => {
    expect(parseDurationMs("250ms")).toBe(250);
    expect(parseDurationMs("10s")).toBe(10_000);
    expect(parseDurationMs("1.5s")).toBe(1500);
    expect(parseDurationMs("2h")).toBe(7_200_000);
    expect(parseDurationMs("1h2m3s4ms")).toBe(3_723_004);
    expect(parseDurationMs("1500")).toBe(1500);
    for (const bad of ["", "s", "10 s", "10x", "-1s", "1s foo"]) {
      expect(parseDurationMs(bad)).toBeUndefined();
    }
  });
});
