/**
 * What the harness records for receipts and replays besides model calls:
 * each tool message's output hash, and the clock and secret reads a tool
 * makes through its context (`time:<label>` with the reading, `secret:<name>`
 * with the deployment's keyed fingerprint only — the secret's value and its
 * plain hash appear nowhere in the messages or the events). A remote
 * worker's harness, which holds no key, records the fingerprint its router
 * sent with a vault secret, and null for any other secret.
 */
import { createHash, randomBytes } from "node:crypto";
import { create, type JsonObject } from "@bufbuild/protobuf";
import { vaultGrantsFromProto } from "@trellis/adapter-sdk";
import { SecretsResponseSchema } from "@trellis/contracts/adapters";
import type { Message } from "@trellis/contracts/core";
import { SecretFingerprints } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  createHarnessAdapter,
  type EnvironmentCall,
  type HarnessTool,
  textSha256,
} from "../../src/index.js";
import { recordedProviders, turnRequest } from "../../src/testing/harness-agents.js";
import { fixture, OPENAI_CHAT } from "../../src/testing/recorded-server.js";
import { useRecordedServer } from "./support/fixture.js";

const SECRET = "wx-key-0123456789abcdef-do-not-leak";
const AT = new Date("2026-11-22T09:30:00.000Z");
const fingerprints = new SecretFingerprints(randomBytes(32));

/** The JSON of messages and events (bigints as strings). */
function jsonOf(value: unknown): string {
  return JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? String(v) : v));
}

const server = useRecordedServer();

function metadataOf(message: Message | undefined): JsonObject {
  return (message?.metadata ?? {}) as JsonObject;
}

/**
 * A get_weather turn: the recorded model asks for the tool `toolCalls` times
 * (default once), then answers (unless `final` is false).
 */
function weatherTurn(options: { taskId?: string; toolCalls?: number; final?: boolean } = {}) {
  const calls = Array.from({ length: options.toolCalls ?? 1 }, () =>
    fixture("openai/chat-weather-tool-call.http"),
  );
  const final = options.final === false ? [] : [fixture("openai/chat-weather-final.http")];
  server.enqueue(OPENAI_CHAT, ...calls, ...final);
  return turnRequest(
    { provider: "openai", model: "gpt-4o-mini", tools: ["get_weather"], stream: false },
    "What's the weather in Paris?",
    options.taskId ? { taskId: options.taskId } : {},
  );
}

describe("harness environment reads and output hashes", () => {
  it("records time:<label> readings and secret:<name> fingerprints of a tool call, never the secret or its plain hash", async () => {
    const reads: { label?: string; name?: string; call: EnvironmentCall }[] = [];
    const weather: HarnessTool = {
      name: "get_weather",
      description: "The current weather of a city.",
      deterministic: true,
      inputSchema: { type: "object", properties: { city: { type: "string" } } },
      run(input, context) {
        const checkedAt = context.now("checked_at");
        // The same label in one call is one reading.
        expect(context.now("checked_at")).toBe(checkedAt);
        const key = context.secret("WEATHER_API_KEY");
        const missing = context.secret("NOT_CONFIGURED");
        return {
          city: input.city as string,
          checked_at: checkedAt,
          authorized: key === SECRET,
          other_secret: missing ?? null,
        };
      },
    };
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: [weather],
      environment: {
        now: (label, call) => {
          reads.push({ label, call });
          return AT;
        },
        secret: (name, call) => {
          reads.push({ name, call });
          return name === "WEATHER_API_KEY" ? SECRET : undefined;
        },
        fingerprint: (value) => fingerprints.of(value),
      },
    });
    const { request, events } = weatherTurn({ taskId: "task_env_1" });
    const result = await adapter.execute(request);
    expect(result.status).toBe("completed");
    const tool = result.messages[1];
    const callId = tool?.toolCallId as string;
    const content = tool?.parts[0]?.kind.case === "text" ? tool.parts[0].kind.value.text : "";
    expect(JSON.parse(content)).toEqual({
      city: "Paris",
      checked_at: AT.toISOString(),
      authorized: true,
      other_secret: null,
    });
    // One clock read (the second was the same reading), two secret reads, all for this call.
    expect(reads).toEqual([
      { label: "checked_at", call: { taskId: "task_env_1", toolCallId: callId } },
      { name: "WEATHER_API_KEY", call: { taskId: "task_env_1", toolCallId: callId } },
      { name: "NOT_CONFIGURED", call: { taskId: "task_env_1", toolCallId: callId } },
    ]);
    const metadata = metadataOf(tool);
    expect(metadata[`tool:${callId}`]).toMatchObject({
      kind: "tool_result",
      status: "ok",
      output: content,
      output_sha256: textSha256(content),
    });
    // The hash is the RFC 8785 form of the output text, as the replay and receipts hash it.
    expect(textSha256(content)).toBe(
      `sha256:${createHash("sha256").update(JSON.stringify(content)).digest("hex")}`,
    );
    expect(metadata["time:checked_at"]).toEqual({
      kind: "time",
      label: "checked_at",
      value: AT.toISOString(),
      tool_call_id: callId,
    });
    expect(metadata["secret:WEATHER_API_KEY"]).toEqual({
      kind: "secret_value",
      name: "WEATHER_API_KEY",
      set: true,
      fingerprint: fingerprints.of(SECRET),
      tool_call_id: callId,
    });
    expect(fingerprints.of(SECRET)).toMatch(/^hmac-sha256:[0-9a-f]{64}$/);
    expect(metadata["secret:NOT_CONFIGURED"]).toEqual({
      kind: "secret_value",
      name: "NOT_CONFIGURED",
      set: false,
      fingerprint: null,
      tool_call_id: callId,
    });
    // The value never leaves the tool, nor its plain hash: not in the messages, not in the events.
    const plain = textSha256(SECRET).slice("sha256:".length);
    for (const text of [jsonOf(result.messages), jsonOf(events)]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(plain);
    }
  });

  it("without a key (a remote worker) records the fingerprint the vault grant carried, else none", async () => {
    const vouched = fingerprints.of(SECRET);
    const weather: HarnessTool = {
      name: "get_weather",
      description: "The current weather of a city.",
      inputSchema: { type: "object", properties: { city: { type: "string" } } },
      run: (_input, context) => ({
        granted: context.secret("vlt_w/KEY") === SECRET,
        unvouched: context.secret("vlt_w/OTHER") === SECRET,
        local: context.secret("LOCAL_KEY") === SECRET,
      }),
    };
    // As a worker's harness: secrets from its own environment, vaults from the host, no key.
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: [weather],
      environment: { secret: (name) => (name === "LOCAL_KEY" ? SECRET : undefined) },
    });
    const { request, events } = weatherTurn({ taskId: "task_env_worker" });
    request.vaultSecrets = async () =>
      new Map([
        [
          "vlt_w",
          {
            allowed: true,
            secrets: new Map([
              ["KEY", SECRET],
              ["OTHER", SECRET],
            ]),
            fingerprints: new Map([["KEY", vouched]]),
          },
        ],
      ]);
    const result = await adapter.execute(request);
    expect(result.status).toBe("completed");
    const tool = result.messages[1];
    const content = tool?.parts[0]?.kind.case === "text" ? tool.parts[0].kind.value.text : "";
    expect(JSON.parse(content)).toEqual({ granted: true, unvouched: true, local: true });
    const metadata = metadataOf(tool);
    expect(metadata["secret:vlt_w/KEY"]).toMatchObject({ set: true, fingerprint: vouched });
    expect(metadata["secret:vlt_w/OTHER"]).toMatchObject({ set: true, fingerprint: null });
    expect(metadata["secret:LOCAL_KEY"]).toMatchObject({ set: true, fingerprint: null });
    for (const key of ["secret:vlt_w/KEY", "secret:vlt_w/OTHER", "secret:LOCAL_KEY"]) {
      expect(metadata[key]).not.toHaveProperty("sha256");
    }
    const plain = textSha256(SECRET).slice("sha256:".length);
    for (const text of [jsonOf(result.messages), jsonOf(events)]) {
      expect(text).not.toContain(SECRET);
      expect(text).not.toContain(plain);
    }
  });

  it("loads the vault secrets once per turn, at its first tool call", async () => {
    const loads: string[] = [];
    const weather: HarnessTool = {
      name: "get_weather",
      description: "The current weather of a city.",
      inputSchema: { type: "object", properties: { city: { type: "string" } } },
      run: (_input, context) => ({ authorized: context.secret("vlt_w/KEY") === SECRET }),
    };
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: [weather],
      environment: {
        vaultSecrets: async (scope) => {
          loads.push(`${scope.workspaceId}/${scope.agentId}`);
          return { read: () => SECRET };
        },
      },
    });
    // The model asks for the tool twice before it answers.
    const { request } = weatherTurn({ taskId: "task_env_vault", toolCalls: 2 });
    const result = await adapter.execute(request);
    expect(result.status).toBe("completed");
    expect(result.messages.filter((m) => m.toolCallId !== "")).toHaveLength(2);
    expect(loads).toHaveLength(1);
  });

  it("fails the turn retryably (vault_unavailable) when the router's grant has a malformed fingerprint", async () => {
    const weather: HarnessTool = {
      name: "get_weather",
      description: "The current weather of a city.",
      inputSchema: { type: "object" },
      run: (_input, context) => context.secret("vlt_w/KEY") ?? "unset",
    };
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: [weather],
    });
    const { request } = weatherTurn({ taskId: "task_env_bad_fingerprint", final: false });
    // What a worker makes of a SecretsResponse whose fingerprint is a plain hash.
    const response = create(SecretsResponseSchema, {
      vaults: [
        {
          vaultId: "vlt_w",
          allowed: true,
          secrets: { KEY: SECRET },
          fingerprints: { KEY: textSha256(SECRET) },
        },
      ],
    });
    request.vaultSecrets = async () => vaultGrantsFromProto(response.vaults);
    const result = await adapter.execute(request);
    expect(result).toMatchObject({
      status: "failed",
      category: "vault_unavailable",
      retryable: true,
    });
    expect(result.status === "failed" && result.message).toContain('vaults[0].fingerprints["KEY"]');
    expect(jsonOf(result)).not.toContain(SECRET);
  });

  it("reads the wall clock and no secrets without an environment; bad labels fail the call, not the turn", async () => {
    const seen: unknown[] = [];
    const clock: HarnessTool = {
      name: "get_weather",
      description: "The current weather of a city.",
      inputSchema: { type: "object" },
      run(_input, context) {
        seen.push(context.now("wall"), context.secret("ANY"));
        context.now("has space");
        return "unreachable";
      },
    };
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: [clock],
    });
    const before = Date.now();
    const { request } = weatherTurn();
    const result = await adapter.execute(request);
    expect(result.status).toBe("completed");
    expect(Date.parse(seen[0] as string)).toBeGreaterThanOrEqual(before - 1000);
    expect(seen[1]).toBeUndefined();
    const tool = result.messages[1];
    const record = metadataOf(tool)[`tool:${tool?.toolCallId}`] as JsonObject;
    expect(record.status).toBe("error");
    expect(String(record.output)).toContain("must match");
  });
});
