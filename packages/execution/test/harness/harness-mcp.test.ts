/**
 * MCP tools for harness agents: a real MCP server (built with the official
 * SDK, `support/mcp-test-server.mjs`) over stdio and over Streamable HTTP,
 * the model recorded (OpenAI wire responses from fixtures). The harness lists
 * the server's tools and offers them to the model namespaced with their input
 * schemas, calls them, records them (`tool_started` with `mcpServer`, the tool
 * record's `mcp`), gates one by approval (run once however often the
 * checkpoint is resumed), and turns failures and timeouts into typed errors.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Role } from "@trellis/contracts/core";
import { isTrellisError } from "@trellis/runtime";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  checkOutbound,
  createHarnessAdapter,
  type ExecutionResult,
  type HarnessEnvironment,
  harnessMcpPolicyFromEnv,
  isPrivateAddress,
  type McpPolicy,
  SecretAccessError,
} from "../../src/index.js";
import { recordedProviders, turnRequest } from "../../src/testing/harness-agents.js";
import {
  fixture,
  OPENAI_CHAT,
  type RecordedServer,
  startRecordedServer,
} from "../../src/testing/recorded-server.js";
import { definitionRefusal } from "./support/fixture.js";

const SERVER_SCRIPT = fileURLToPath(new URL("./support/mcp-test-server.mjs", import.meta.url));
const NODE = process.execPath;
const TOKEN = "mcp-test-token-7f3a";

let model: RecordedServer;
let dir: string;
let http: { process: ChildProcess; url: string; notes: string };

async function startHttpServer(notes: string): Promise<typeof http> {
  const child = spawn(NODE, [SERVER_SCRIPT, "--http"], {
    env: { ...process.env, NOTES_FILE: notes, EXPECTED_TOKEN: TOKEN },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      out += chunk.toString();
      const match = /PORT (\d+)/.exec(out);
      if (match) resolve(Number(match[1]));
    });
    child.once("exit", (code) => reject(new Error(`the MCP HTTP server exited (${code})`)));
    setTimeout(() => reject(new Error("the MCP HTTP server did not start")), 15_000).unref();
  });
  return { process: child, url: `http://127.0.0.1:${port}`, notes };
}

beforeAll(async () => {
  model = await startRecordedServer();
  dir = mkdtempSync(join(tmpdir(), "trellis-mcp-"));
  http = await startHttpServer(join(dir, "http-notes.txt"));
});
afterAll(async () => {
  http?.process.kill();
  await model?.close();
  rmSync(dir, { recursive: true, force: true });
});
afterEach(() => {
  expect(model.pending()).toEqual({});
  model.requests.length = 0;
});

/** The deployment's policy in these tests: this node may be started, loopback is allowed. */
const TEST_POLICY: McpPolicy = {
  stdioCommands: [NODE],
  allowPrivateAddresses: true,
  connectTimeoutMs: 10_000,
  maxResultChars: 1000,
};

/** Vault `vault_ops` granting `mcp_token` to every agent. */
const vaultEnvironment: HarnessEnvironment = {
  async vaultSecrets() {
    return {
      read(name) {
        if (name === "vault_ops/mcp_token") return TOKEN;
        throw new SecretAccessError("secret_not_found", name, "no such secret");
      },
    };
  },
};

function adapter(policy: McpPolicy = TEST_POLICY, environment = vaultEnvironment) {
  return createHarnessAdapter({
    providers: recordedProviders(model.url),
    mcp: policy,
    environment,
  });
}

/** An OpenAI agent whose only tools are those of the MCP server `server`. */
function mcpAgent(server: JsonObject, extra: JsonObject = {}): JsonObject {
  return {
    provider: "openai",
    model: "gpt-4o-mini",
    tools: [],
    stream: false,
    mcp_servers: [server],
    ...extra,
  };
}

function stdioAgent(extra: JsonObject = {}, server: JsonObject = {}): JsonObject {
  return mcpAgent(
    {
      name: "calc",
      command: NODE,
      args: [SERVER_SCRIPT],
      env: { PID_FILE: join(dir, "stdio.pid") },
      ...server,
    },
    extra,
  );
}

function httpAgent(server: JsonObject = {}): JsonObject {
  return mcpAgent({
    name: "docs",
    url: `${http.url}/mcp`,
    bearer_secret: "vault_ops/mcp_token",
    tools: ["write_note", "add"],
    require_approval: ["write_note"],
    ...server,
  });
}

function of<S extends ExecutionResult["status"]>(result: ExecutionResult, status: S) {
  if (result.status !== status) {
    throw new Error(`expected ${status}, got ${JSON.stringify(result)}`);
  }
  return result as Extract<ExecutionResult, { status: S }>;
}

function toolRecord(result: ExecutionResult, callId: string): JsonObject {
  const message = result.messages.find((m) => m.toolCallId === callId);
  const record = message?.metadata?.[`tool:${callId}`];
  if (typeof record !== "object" || record === null || Array.isArray(record)) {
    throw new Error(`no tool record for ${callId}`);
  }
  return record as JsonObject;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function stats(): Promise<{ opened: number; closed: number; open: number; calls: number }> {
  return (await (await fetch(`${http.url}/stats`)).json()) as never;
}

describe("MCP tools over stdio", () => {
  it("offers the server's tools namespaced, calls one, records it, and ends the server process", async () => {
    model.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-mcp-add-tool-call.http"),
      fixture("openai/chat-mcp-add-final.http"),
    );
    const { request, events } = turnRequest(stdioAgent(), "What is 2 + 3?");
    const result = of(await adapter().execute(request), "completed");

    // The model was offered the server's tools, schemas passed through.
    const body = model.requests[0]?.body as {
      tools: { function: { name: string; parameters: JsonObject } }[];
    };
    const offered = body.tools.map((t) => t.function.name);
    expect(offered).toEqual([
      "mcp__calc__add",
      "mcp__calc__write_note",
      "mcp__calc__slow",
      "mcp__calc__fail",
      "mcp__calc__crash",
      "mcp__calc__big",
    ]);
    expect(body.tools[0]?.function.parameters).toMatchObject({
      type: "object",
      properties: { a: { type: "number", description: "first addend" }, b: { type: "number" } },
      required: ["a", "b"],
    });

    const callId = "call_McpAdd1sT2dIo3Xy4Zw5Ab";
    expect(result.messages.map((m) => Role[m.role])).toEqual(["ASSISTANT", "TOOL", "ASSISTANT"]);
    expect(toolRecord(result, callId)).toMatchObject({
      kind: "tool_result",
      name: "mcp__calc__add",
      status: "ok",
      output: "5",
      mcp: { server: "calc", tool: "add" },
    });
    // The tool result the model got is the server's answer.
    const second = model.requests[1]?.body as { messages: { role: string; content: string }[] };
    expect(second.messages.at(-1)).toMatchObject({ role: "tool", content: "5" });
    expect(events).toContainEqual({
      kind: "tool_started",
      toolCallId: callId,
      name: "mcp__calc__add",
      input: { a: 2, b: 3 },
      mcpServer: "calc",
    });
    expect(events).toContainEqual({
      kind: "tool_finished",
      toolCallId: callId,
      name: "mcp__calc__add",
      status: "ok",
    });
    // The turn's server process is gone once the turn ended.
    const pid = Number(readFileSync(join(dir, "stdio.pid"), "utf8"));
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(false);
  });

  it("turns a timeout, a tool error, a large result, a server exit and a bad input into typed results", async () => {
    model.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-mcp-failures-tool-call.http"),
      fixture("openai/chat-mcp-failures-final.http"),
    );
    const { request, events } = turnRequest(stdioAgent({}, { timeout_ms: 2000 }), "Try the tools");
    const started = Date.now();
    const result = of(await adapter().execute(request), "completed");
    // The slow call (30 s) was cut at its 2 s bound: the turn did not wait for it.
    expect(Date.now() - started).toBeLessThan(15_000);

    expect(toolRecord(result, "call_McpSlow1aB2cD3eF4gH5iJ")).toMatchObject({
      status: "error",
      mcp: { server: "calc", tool: "slow" },
    });
    expect(toolRecord(result, "call_McpSlow1aB2cD3eF4gH5iJ").output).toMatch(
      /^Error: mcp__calc__slow failed: \[mcp_timeout\] MCP server calc: /,
    );
    expect(toolRecord(result, "call_McpFail1aB2cD3eF4gH5iJ")).toMatchObject({
      status: "error",
      output:
        "Error: mcp__calc__fail failed: [mcp_tool_error] MCP server calc: fail reported an error: disk full",
    });
    const big = toolRecord(result, "call_McpBig01aB2cD3eF4gH5iJ");
    expect(big.status).toBe("ok");
    expect(big.output).toMatch(
      /^x{1000}\n\[truncated: the result had 5000 characters; the limit is 1000\]$/,
    );
    expect(toolRecord(result, "call_McpCrsh1aB2cD3eF4gH5iJ").output).toMatch(
      /\[mcp_server_exited\] MCP server calc: /,
    );
    expect(toolRecord(result, "call_McpAftr1aB2cD3eF4gH5iJ").output).toMatch(
      /\[mcp_server_exited\] MCP server calc: .* before the call/,
    );
    // A call whose input fails the server's schema is not sent to the server.
    expect(toolRecord(result, "call_McpBadA1aB2cD3eF4gH5iJ")).toMatchObject({
      status: "rejected",
    });
    expect(
      events
        .filter((e) => e.kind === "tool_started")
        .map((e) => e.kind === "tool_started" && e.name),
    ).toEqual([
      "mcp__calc__slow",
      "mcp__calc__fail",
      "mcp__calc__big",
      "mcp__calc__crash",
      "mcp__calc__add",
    ]);
    expect(result.messages.at(-1)?.parts[0]?.kind.value).toMatchObject({
      text: "The calculator server is not working right now.",
    });
  });

  it("fails the turn (typed, retryable) when a server cannot start", async () => {
    const { request } = turnRequest(
      stdioAgent({}, { args: ["-e", "process.exit(3)"], env: {} }),
      "What is 2 + 3?",
    );
    const result = of(await adapter().execute(request), "failed");
    expect(result.category).toBe("mcp_unavailable");
    expect(result.retryable).toBe(true);
    expect(result.message).toMatch(/MCP server calc/);
  });

  it("bounds a server that never answers initialize, and ends its process", async () => {
    const pidFile = join(dir, "silent.pid");
    const silent = `require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000);`;
    const { request } = turnRequest(stdioAgent({}, { args: ["-e", silent], env: {} }), "Hi");
    const started = Date.now();
    const result = of(
      await adapter({ ...TEST_POLICY, connectTimeoutMs: 3000 }).execute(request),
      "failed",
    );
    expect(result.category).toBe("mcp_unavailable");
    expect(result.message).toMatch(/\[mcp_timeout\] MCP server calc: no answer to initialize/);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(alive(Number(readFileSync(pidFile, "utf8")))).toBe(false);
  });

  it("ends a canceled turn during a slow MCP call at once, the server process with it", async () => {
    model.enqueue(OPENAI_CHAT, fixture("openai/chat-mcp-failures-tool-call.http"));
    const abort = new AbortController();
    const { request } = turnRequest(stdioAgent(), "Try the tools", { signal: abort.signal });
    let started = 0;
    const report = request.onEvent;
    request.onEvent = (event) => {
      report?.(event);
      // Canceled 300 ms into the slow call.
      if (event.kind === "tool_started" && event.name === "mcp__calc__slow") {
        started = Date.now();
        setTimeout(() => abort.abort(), 300).unref();
      }
    };
    const result = await adapter().execute(request);
    expect(started).toBeGreaterThan(0);
    expect(result.status, JSON.stringify(result).slice(0, 600)).toBe("cancelled");
    // The slow call would take 30 s (and the server's timeout is 60 s).
    expect(Date.now() - started).toBeLessThan(15_000);
    // Its server is ended too, without waiting for the slow call.
    const pid = Number(readFileSync(join(dir, "stdio.pid"), "utf8"));
    const deadline = Date.now() + 5000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(alive(pid)).toBe(false);
  });

  it("refuses stdio servers unless the deployment lists the command", async () => {
    for (const policy of [{}, { stdioCommands: ["/usr/bin/other-server"] }] as McpPolicy[]) {
      const harness = adapter({
        ...TEST_POLICY,
        ...policy,
        stdioCommands: policy.stdioCommands ?? [],
      });
      const thrown = definitionRefusal(harness, stdioAgent());
      expect(isTrellisError(thrown) && thrown.reason).toBe("agent_definition_invalid");
      expect(isTrellisError(thrown) && thrown.param).toBe(
        "agent.definition.mcp_servers[0].command",
      );
      const { request } = turnRequest(stdioAgent(), "What is 2 + 3?");
      const result = of(await harness.execute(request), "failed");
      expect(result.category).toBe("agent_definition_invalid");
    }
  });
});

describe("MCP tools over Streamable HTTP", () => {
  it("gates a tool by approval, runs it once with the vault's bearer token, and closes the session", async () => {
    model.enqueue(OPENAI_CHAT, fixture("openai/chat-mcp-note-tool-call.http"));
    const harness = adapter();
    const before = await stats();
    const callId = "call_McpNote1Ht2Tp3Ab4Cd5Ef";
    const first = turnRequest(httpAgent(), "Note: buy milk", { taskId: "task_mcp_http" });
    const waiting = of(await harness.execute(first.request), "suspended");
    expect(waiting.signalLabel).toBe(`approval:${callId}`);
    expect(waiting.metadata).toMatchObject({
      kind: "tool_approval",
      tool_name: "mcp__docs__write_note",
      mcp_server: "docs",
      arguments: { text: "buy milk" },
    });
    // Only the tools the definition names were offered.
    const offered =
      (model.requests[0]?.body as { tools: { function: { name: string } }[] } | undefined)?.tools ??
      [];
    expect(offered.map((t) => t.function.name)).toEqual([
      "mcp__docs__write_note",
      "mcp__docs__add",
    ]);
    expect(existsSync(http.notes)).toBe(false);

    const resume = { checkpoint: waiting.checkpoint as JsonValue, payload: { approved: true } };
    model.enqueue(OPENAI_CHAT, fixture("openai/chat-mcp-note-final.http"));
    const second = turnRequest(httpAgent(), "Note: buy milk", {
      taskId: "task_mcp_http",
      resume,
    });
    const done = of(await harness.execute(second.request), "completed");
    expect(toolRecord(done, callId)).toMatchObject({
      name: "mcp__docs__write_note",
      status: "ok",
      output: "saved: buy milk",
      approval: { approved: true },
      mcp: { server: "docs", tool: "write_note" },
    });
    expect(second.events).toContainEqual(
      expect.objectContaining({ kind: "tool_started", toolCallId: callId, mcpServer: "docs" }),
    );

    // The same checkpoint resumed again: the recorded result, no second run.
    model.enqueue(OPENAI_CHAT, fixture("openai/chat-mcp-note-final.http"));
    const third = turnRequest(httpAgent(), "Note: buy milk", { taskId: "task_mcp_http", resume });
    const again = of(await harness.execute(third.request), "completed");
    expect(toolRecord(again, callId)).toMatchObject({ status: "ok", recorded: true });
    expect(readFileSync(http.notes, "utf8")).toBe("buy milk\n");

    // One MCP session per turn, each terminated when its turn ended; one tools/call in all.
    const after = await stats();
    expect(after.opened - before.opened).toBe(3);
    expect(after.closed - before.closed).toBe(3);
    expect(after.open).toBe(0);
    expect(after.calls - before.calls).toBe(1);
  });

  it("cuts off an HTTP response larger than the deployment's bound (typed error)", async () => {
    model.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-mcp-big-http-tool-call.http"),
      fixture("openai/chat-mcp-failures-final.http"),
    );
    const { request } = turnRequest(
      httpAgent({ tools: ["big"], require_approval: [] }),
      "Make it big",
    );
    const started = Date.now();
    const result = of(
      await adapter({ ...TEST_POLICY, maxResponseBytes: 8000 }).execute(request),
      "completed",
    );
    // At once, not at the call's 60 s timeout.
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(toolRecord(result, "call_McpBigH1tT2pI3o4Xy5Zw6")).toMatchObject({
      status: "error",
      output:
        "Error: mcp__docs__big failed: [mcp_protocol_error] MCP server docs: tools/call big: the HTTP response is larger than the deployment's bound",
    });
  });

  it("fails the turn when the bearer secret is missing or the server refuses it", async () => {
    const missing = turnRequest(
      httpAgent({ bearer_secret: "vault_ops/other_token" }),
      "Note: buy milk",
    );
    const noSecret = of(await adapter().execute(missing.request), "failed");
    expect(noSecret.category).toBe("mcp_credentials_unavailable");
    expect(noSecret.message).toContain("vault_ops/other_token");

    const wrong: HarnessEnvironment = {
      async vaultSecrets() {
        return { read: () => "not-the-token" };
      },
    };
    const refused = turnRequest(httpAgent(), "Note: buy milk");
    const unauthorized = of(await adapter(TEST_POLICY, wrong).execute(refused.request), "failed");
    expect(unauthorized.category).toBe("mcp_unavailable");
    expect(unauthorized.message).not.toContain("not-the-token");
  });

  it("refuses loopback and private addresses unless the deployment allows them", async () => {
    const strict = adapter({ stdioCommands: [] });
    const thrown = definitionRefusal(strict, httpAgent());
    expect(isTrellisError(thrown) && thrown.param).toBe("agent.definition.mcp_servers[0].url");

    expect(isPrivateAddress("127.0.0.1")).toBe(true);
    expect(isPrivateAddress("10.1.2.3")).toBe(true);
    expect(isPrivateAddress("169.254.169.254")).toBe(true);
    expect(isPrivateAddress("::ffff:192.168.0.1")).toBe(true);
    expect(isPrivateAddress("fd00::1")).toBe(true);
    expect(isPrivateAddress("93.184.216.34")).toBe(false);
    await expect(checkOutbound(new URL("https://127.0.0.1:8443/mcp"), false)).rejects.toThrow(
      /refused by the outbound policy/,
    );
    await expect(checkOutbound(new URL("http://93.184.216.34/mcp"), false)).rejects.toThrow(
      /https only/,
    );
    await expect(checkOutbound(new URL(`${http.url}/mcp`), true)).resolves.toBeUndefined();
  });
});

describe("the MCP section of a definition", () => {
  const cases: [JsonObject, string][] = [
    [{ mcp_servers: {} }, "mcp_servers"],
    [{ mcp_servers: [{ name: "a b", url: "https://x.example/mcp" }] }, "mcp_servers[0].name"],
    [{ mcp_servers: [{ name: "a" }] }, "mcp_servers[0]"],
    [
      { mcp_servers: [{ name: "a", url: "https://x.example/mcp", command: NODE }] },
      "mcp_servers[0]",
    ],
    [{ mcp_servers: [{ name: "a", url: "ftp://x.example/mcp" }] }, "mcp_servers[0].url"],
    [{ mcp_servers: [{ name: "a", url: "https://u:p@x.example/mcp" }] }, "mcp_servers[0].url"],
    [
      { mcp_servers: [{ name: "a", url: "https://x.example/mcp", bearer_secret: "token" }] },
      "mcp_servers[0].bearer_secret",
    ],
    [
      { mcp_servers: [{ name: "a", url: "https://x.example/mcp", timeout_ms: 10_000_000 }] },
      "mcp_servers[0].timeout_ms",
    ],
    [
      { mcp_servers: [{ name: "a", url: "https://x.example/mcp", extra: 1 }] },
      "mcp_servers[0].extra",
    ],
    [
      { mcp_servers: [{ name: "a", command: NODE, env: { "BAD-NAME": "1" } }] },
      "mcp_servers[0].env.BAD-NAME",
    ],
    [
      { mcp_servers: [{ name: "a", command: NODE, env: { NODE_OPTIONS: "--require x" } }] },
      "mcp_servers[0].env.NODE_OPTIONS",
    ],
    [
      { mcp_servers: [{ name: "a", command: NODE, env: { LD_PRELOAD: "/tmp/x.so" } }] },
      "mcp_servers[0].env.LD_PRELOAD",
    ],
    [
      { mcp_servers: [{ name: "a", command: NODE, env: { PATH: "/tmp" } }] },
      "mcp_servers[0].env.PATH",
    ],
    [
      {
        mcp_servers: [
          { name: "a", url: "https://x.example/mcp" },
          { name: "a", url: "https://y.example/mcp" },
        ],
      },
      "mcp_servers[1].name",
    ],
    [
      {
        mcp_servers: [{ name: "a", url: "https://x.example/mcp" }],
        require_approval: ["mcp__b__x"],
      },
      "require_approval[0]",
    ],
  ];
  it.each(cases)("refuses %j at %s", (extra, path) => {
    const thrown = definitionRefusal(adapter(), {
      provider: "openai",
      model: "gpt-4o-mini",
      ...extra,
    });
    expect(isTrellisError(thrown) && thrown.reason).toBe("agent_definition_invalid");
    expect(isTrellisError(thrown) && thrown.param).toBe(`agent.definition.${path}`);
  });

  it("reads the deployment's policy from its environment", () => {
    expect(harnessMcpPolicyFromEnv({})).toEqual({
      stdioCommands: [],
      allowPrivateAddresses: false,
    });
    expect(
      harnessMcpPolicyFromEnv({
        TRELLIS_HARNESS_MCP_STDIO_COMMANDS: " mcp-files, /usr/bin/mcp-git ,",
        TRELLIS_HARNESS_MCP_ALLOW_PRIVATE: "true",
        TRELLIS_HARNESS_MCP_CALL_TIMEOUT_MS: "5000",
        TRELLIS_HARNESS_MCP_MAX_RESPONSE_BYTES: "1024",
      }),
    ).toEqual({
      stdioCommands: ["mcp-files", "/usr/bin/mcp-git"],
      allowPrivateAddresses: true,
      callTimeoutMs: 5000,
      maxResponseBytes: 1024,
    });
    expect(harnessMcpPolicyFromEnv({ TRELLIS_HARNESS_MCP_STDIO_COMMANDS: "*" }).stdioCommands).toBe(
      "any",
    );
    expect(() => harnessMcpPolicyFromEnv({ TRELLIS_HARNESS_MCP_CALL_TIMEOUT_MS: "soon" })).toThrow(
      /TRELLIS_HARNESS_MCP_CALL_TIMEOUT_MS must be a positive integer/,
    );
  });

  it("accepts MCP tools in require_approval by their namespaced names", () => {
    expect(() =>
      adapter().validateDefinition?.({
        provider: "openai",
        model: "gpt-4o-mini",
        mcp_servers: [{ name: "docs", url: "https://x.example/mcp", require_approval: true }],
        require_approval: ["mcp__docs__write_note"],
      }),
    ).not.toThrow();
  });
});
