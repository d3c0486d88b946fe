import { describe, expect, it } from "vitest";
import { TrellisError } from "../src/errors.js";
import { createLogger, isSecretKey, parseLogLevel } from "../src/logger.js";
import { captureLogger } from "./support.js";

describe("createLogger", () => {
  it("writes one JSON object per line with time, level, service, msg and fields", () => {
    const { logger, lines } = captureLogger("tasks", "info");
    logger.info("task started", { task_id: "tsk_1", attempt: 2 });
    expect(lines).toHaveLength(1);
    const [line] = lines;
    expect(Object.keys(line!).slice(0, 4)).toEqual(["time", "level", "service", "msg"]);
    expect(line).toMatchObject({
      level: "info",
      service: "tasks",
      msg: "task started",
      task_id: "tsk_1",
      attempt: 2,
    });
    expect(new Date(line!.time as string).toISOString()).toBe(line!.time);
  });

  it("filters by level, from options or TRELLIS_LOG_LEVEL", () => {
    const chunks: string[] = [];
    const logger = createLogger({
      service: "s",
      env: { TRELLIS_LOG_LEVEL: "WARN" },
      write: (c) => chunks.push(c),
    });
    expect(logger.level).toBe("warn");
    logger.debug("d");
    logger.info("i");
    logger.warn("w");
    logger.error("e");
    expect(chunks.map((c) => JSON.parse(c).msg)).toEqual(["w", "e"]);
    expect(logger.enabled("info")).toBe(false);
    expect(createLogger({ service: "s", env: {}, write: () => {} }).level).toBe("info");
    expect(parseLogLevel("warning")).toBe("warn");
    expect(parseLogLevel("loud")).toBeUndefined();
  });

  it("never prints secrets, at any depth, nor passwords in URLs", () => {
    const { logger, lines } = captureLogger();
    logger.info("calling provider", {
      authorization: "Bearer abc",
      api_key: "sk-1",
      request: {
        headers: new Headers({ "x-api-key": "sk-2", "content-type": "application/json" }),
        body: { refreshToken: "rt", password: "p", max_tokens: 512 },
      },
      clientSecret: "cs",
      database: "postgres://trellis:hunter2@db:5432/trellis",
    });
    const text = JSON.stringify(lines[0]);
    expect(text).not.toMatch(/abc|sk-1|sk-2|"rt"|"p"|"cs"|hunter2/);
    expect(lines[0]).toMatchObject({
      authorization: "[REDACTED]",
      api_key: "[REDACTED]",
      request: {
        headers: { "x-api-key": "[REDACTED]", "content-type": "application/json" },
        body: { refreshToken: "[REDACTED]", password: "[REDACTED]", max_tokens: 512 },
      },
      clientSecret: "[REDACTED]",
      database: "postgres://trellis:***@db:5432/trellis",
    });
  });

  it("classifies secret names by word", () => {
    for (const key of [
      "Authorization",
      "x-api-key",
      "apiKey",
      "OPENAI_API_KEY",
      "accessToken",
      "token",
      "client_secret",
      "set-cookie",
      "PASSWORD",
      "private_key",
    ]) {
      expect(isSecretKey(key), key).toBe(true);
    }
    for (const key of [
      "max_tokens",
      "input_tokens",
      "author",
      "keyboard",
      "session_id",
      "monkey",
    ]) {
      expect(isSecretKey(key), key).toBe(false);
    }
  });

  it("serializes errors with their reason and cause, and survives cycles", () => {
    const { logger, lines } = captureLogger();
    const cause = new Error("socket hang up");
    const error = new TrellisError({
      reason: "upstream_unavailable",
      message: "model down",
      cause,
    });
    const cyclic: Record<string, unknown> = { name: "loop" };
    cyclic.self = cyclic;
    logger.error("failed", { error, cyclic, big: 10n, when: new Date(0) });
    expect(lines[0]).toMatchObject({
      error: {
        name: "TrellisError",
        message: "model down",
        reason: "upstream_unavailable",
        cause: { name: "Error", message: "socket hang up" },
      },
      cyclic: { name: "loop", self: "[Circular]" },
      big: "10",
      when: "1970-01-01T00:00:00.000Z",
    });
    expect(typeof (lines[0]!.error as { stack: unknown }).stack).toBe("string");
  });

  it("binds fields in children and never lets a field overwrite the line's own keys", () => {
    const { logger, lines } = captureLogger("svc");
    logger.child({ component: "relay" }).warn("lagging", { level: "custom", msg: "x" });
    expect(lines[0]).toMatchObject({
      level: "warn",
      msg: "lagging",
      service: "svc",
      component: "relay",
      field_level: "custom",
      field_msg: "x",
    });
  });
});
