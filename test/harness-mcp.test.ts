// MCP tools for harness agents, end to end in embedded mode: a persona whose
// definition names two real MCP servers (built with the official SDK) — one
// over stdio, started from the command the deployment allows
// (TRELLIS_HARNESS_MCP_STDIO_COMMANDS), one over Streamable HTTP on loopback
// (TRELLIS_HARNESS_MCP_ALLOW_PRIVATE) whose bearer token is a secret of a
// real vault — runs recorded turns over the Harn REST API. The event log
// records `agent.mcp_tool_use` (with the server) and the tool results; the
// approval-gated tool pauses the task until a tool confirmation and then runs
// once; the receipts list the calls, with their MCP server.
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { adaptersService } from "@trellis/adapters";
import { enqueueChat, type RecordedServer, startRecordedServer } from "@trellis/execution/testing";
import { gatewayService } from "@trellis/gateway";
import { harnClient, type Json, poll } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ADMIN_KEY = `trellis_sk_${randomBytes(32).toString("base64url")}`;
const MCP_TOKEN = `mcp-${randomBytes(16).toString("hex")}`;
const SERVER_SCRIPT = new URL(
  "../packages/execution/test/harness/support/mcp-test-server.mjs",
  import.meta.url,
).pathname;

describe("harness agents with MCP tools (embedded)", () => {
  let trellis: EmbeddedTrellis;
  let provider: RecordedServer;
  let mcpHttp: ChildProcess;
  let mcpUrl: string;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "trellis-mcp-e2e-"));
    provider = await startRecordedServer();
    mcpHttp = spawn(process.execPath, [SERVER_SCRIPT, "--http"], {
      env: { ...process.env, EXPECTED_TOKEN: MCP_TOKEN, NOTES_FILE: join(dir, "notes.txt") },
      stdio: ["ignore", "pipe", "inherit"],
    });
    const port = await new Promise<number>((resolve, reject) => {
      let out = "";
      mcpHttp.stdout?.on("data", (chunk: Buffer) => {
        out += chunk.toString();
        const match = /PORT (\d+)/.exec(out);
        if (match) resolve(Number(match[1]));
      });
      mcpHttp.once("exit", (code) => reject(new Error(`MCP server exited (${code})`)));
    });
    mcpUrl = `http://127.0.0.1:${port}/mcp`;
    trellis = await startEmbedded({
      services: [gatewayService, tasksService, receiptsService, adaptersService],
      port: 0,
      logger: createLogger({ service: "trellis", level: "error", write: () => {} }),
      env: {
        TRELLIS_API_KEY: ADMIN_KEY,
        OPENAI_API_KEY: "sk-test-mcp",
        OPENAI_BASE_URL: `${provider.url}/v1`,
        TRELLIS_HARNESS_MCP_STDIO_COMMANDS: process.execPath,
        TRELLIS_HARNESS_MCP_ALLOW_PRIVATE: "1",
      },
    });
  }, 120_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
    await provider?.close();
    mcpHttp?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  async function settled(admin: ReturnType<typeof harnClient>, taskId: string, status: string) {
    return poll(
      async () => {
        const t = await admin.get(`/v1/tasks/${taskId}`);
        if (t.json.status === "FAILED") throw new Error(`task failed: ${t.text}`);
        return t.json.status === status ? t.json : undefined;
      },
      { timeoutMs: 30_000, what: `task ${taskId} ${status}` },
    );
  }

  async function receiptOf(admin: ReturnType<typeof harnClient>, taskId: string): Promise<Json> {
    return poll(
      async () => {
        const r = await admin.get(`/v1/tasks/${taskId}/receipts`);
        const found =
          r.status === 200
            ? r.json.data.find((x: Json) => x.subject?.object === "task")
            : undefined;
        // The signed document itself.
        return found?.wire.payload;
      },
      { timeoutMs: 20_000, what: `the receipt of ${taskId}` },
    );
  }

  it("records MCP calls over stdio and HTTP in events and receipts, with an approval", async () => {
    const admin = harnClient(trellis.address.url, ADMIN_KEY);
    const persona = await admin.post("/v1/personas", {
      name: "mcp-user",
      entry_workflow: "harness",
      definition: {
        provider: "openai",
        model: "gpt-4o-mini",
        tools: [],
        stream: false,
        mcp_servers: [
          { name: "calc", command: process.execPath, args: [SERVER_SCRIPT], tools: ["add"] },
          {
            name: "docs",
            url: mcpUrl,
            bearer_secret: "vlt_mcp/token",
            tools: ["write_note"],
            require_approval: ["write_note"],
          },
        ],
      },
    });
    expect(persona.status, persona.text).toBe(201);
    const vault = await admin.post("/v1/vaults", {
      id: "vlt_mcp",
      workspace_id: "default",
      provider: "trellis",
      capabilities: ["read", "write"],
      allowed_agent_ids: [persona.json.id],
    });
    expect(vault.status, vault.text).toBe(201);
    const stored = await admin.request("PUT", "/v1/vaults/vlt_mcp/secrets/token", {
      body: { value: MCP_TOKEN },
    });
    expect(stored.status).toBe(200);
    const session = await admin.post("/v1/sessions", { persona_id: persona.json.id });

    // stdio: the model calls calc's add.
    enqueueChat(provider, "openai/chat-mcp-add-tool-call.http", "openai/chat-mcp-add-final.http");
    const sum = await admin.post(`/v1/sessions/${session.json.id}/tasks`, {
      input: "What is 2 + 3?",
    });
    expect(sum.status, sum.text).toBe(202);
    await settled(admin, sum.json.id, "COMPLETED");
    const offered =
      (provider.requests[0]?.body as { tools: { function: { name: string } }[] } | undefined)
        ?.tools ?? [];
    expect(offered.map((t) => t.function.name)).toEqual([
      "mcp__calc__add",
      "mcp__docs__write_note",
    ]);

    const sumEvents = (await admin.get(`/v1/tasks/${sum.json.id}/events`)).json.data as Json[];
    const use = sumEvents.find((e) => e.event === "agent.mcp_tool_use");
    expect(use?.payload).toMatchObject({
      tool_call_id: "call_McpAdd1sT2dIo3Xy4Zw5Ab",
      name: "mcp__calc__add",
      input: { a: 2, b: 3 },
      server: "calc",
    });
    expect(sumEvents.some((e) => e.event === "agent.tool_use")).toBe(false);
    const result = sumEvents.find((e) => e.event === "agent.tool_result");
    expect(JSON.stringify(result?.payload)).toContain('"mcp":{"server":"calc","tool":"add"}');
    const sumReceipt = await receiptOf(admin, sum.json.id);
    expect(sumReceipt.side_effects.tool_calls).toEqual([
      expect.objectContaining({
        tool: "mcp__calc__add",
        call_id: "call_McpAdd1sT2dIo3Xy4Zw5Ab",
        status: "succeeded",
        metadata: { mcp_server: "calc" },
      }),
    ]);

    // HTTP: the approval-gated write_note pauses the task until confirmed.
    enqueueChat(provider, "openai/chat-mcp-note-tool-call.http");
    const note = await admin.post(`/v1/sessions/${session.json.id}/tasks`, {
      input: "Note: buy milk",
    });
    expect(note.status, note.text).toBe(202);
    await settled(admin, note.json.id, "INPUT_REQUIRED");
    enqueueChat(provider, "openai/chat-mcp-note-final.http");
    const confirm = await admin.post(`/v1/tasks/${note.json.id}/messages`, {
      kind: "tool_confirmation",
      message: { role: "user", parts: [{ type: "text", text: "yes" }] },
    });
    expect(confirm.status, confirm.text).toBe(201);
    await settled(admin, note.json.id, "COMPLETED");
    expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("buy milk\n");

    const noteEvents = (await admin.get(`/v1/tasks/${note.json.id}/events`)).json.data as Json[];
    expect(noteEvents.find((e) => e.event === "agent.mcp_tool_use")?.payload).toMatchObject({
      name: "mcp__docs__write_note",
      server: "docs",
    });
    const noteReceipt = await receiptOf(admin, note.json.id);
    expect(noteReceipt.side_effects.tool_calls).toEqual([
      expect.objectContaining({
        tool: "mcp__docs__write_note",
        status: "succeeded",
        metadata: { mcp_server: "docs" },
      }),
    ]);
    // The vault's token never reaches events or receipts.
    expect(JSON.stringify([sumEvents, noteEvents, sumReceipt, noteReceipt])).not.toContain(
      MCP_TOKEN,
    );
    expect(provider.pending()).toEqual({});

    // Replays answer MCP calls from the recording: no server is contacted,
    // nothing runs again, the replay's transcript matches.
    const stats = async () => (await fetch(new URL("/stats", mcpUrl))).json();
    const before = await stats();
    for (const [source, answer] of [
      [sum.json.id, "2 + 3 = 5."],
      [note.json.id, "Saved your note: buy milk."],
    ] as const) {
      const replay = await admin.post(`/v1/tasks/${source}/replay`, { mode: "exact" });
      expect(replay.status, replay.text).toBe(202);
      await settled(admin, replay.json.id, "COMPLETED");
      // The texts of the messages and tool results, in order.
      const texts = async (taskId: string) => {
        const events = (await admin.get(`/v1/tasks/${taskId}/events`)).json.data as Json[];
        return events
          .filter((e) => e.event === "agent.message" || e.event === "agent.tool_result")
          .map((e) =>
            [...JSON.stringify(e.payload).matchAll(/"text":("(?:[^"\\]|\\.)*")/g)]
              .map((m) => m[1])
              .join(""),
          );
      };
      const replayed = await texts(replay.json.id);
      expect(replayed.at(-1)).toBe(JSON.stringify(answer));
      expect(replayed).toEqual(await texts(source));
    }
    expect(await stats()).toEqual(before);
    expect(readFileSync(join(dir, "notes.txt"), "utf8")).toBe("buy milk\n");
    expect(provider.pending()).toEqual({});
  }, 180_000);
});
