// A real MCP server for the harness tests, built with the official SDK.
//
//   node mcp-test-server.mjs            serves MCP over stdio
//   node mcp-test-server.mjs --http     serves Streamable HTTP on a loopback port,
//                                       printing "PORT <n>" on stdout; GET /stats
//                                       reports sessions opened / open / closed
//
// Environment: NOTES_FILE (write_note appends a line there), PID_FILE (the
// process writes its pid there), EXPECTED_TOKEN (HTTP: a request without
// "Authorization: Bearer <token>" is refused with 401).
import { randomUUID } from "node:crypto";
import { appendFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";

if (process.env.PID_FILE) writeFileSync(process.env.PID_FILE, String(process.pid));

const text = (value) => ({ content: [{ type: "text", text: value }] });

function buildServer() {
  const server = new McpServer({ name: "trellis-test-tools", version: "1.0.0" });
  server.registerTool(
    "add",
    {
      description: "Adds two numbers.",
      inputSchema: { a: z.number().describe("first addend"), b: z.number() },
    },
    async ({ a, b }) => text(String(a + b)),
  );
  server.registerTool(
    "write_note",
    { description: "Saves a note.", inputSchema: { text: z.string().min(1) } },
    async ({ text: note }) => {
      if (process.env.NOTES_FILE) appendFileSync(process.env.NOTES_FILE, `${note}\n`);
      return text(`saved: ${note}`);
    },
  );
  server.registerTool(
    "slow",
    { description: "Answers after ms milliseconds.", inputSchema: { ms: z.number().int() } },
    async ({ ms }) => {
      await new Promise((resolve) => setTimeout(resolve, ms));
      return text("done");
    },
  );
  server.registerTool("fail", { description: "Always fails." }, async () => ({
    ...text("disk full"),
    isError: true,
  }));
  server.registerTool("crash", { description: "Ends the server process." }, async () => {
    process.exit(7);
  });
  server.registerTool(
    "big",
    { description: "Returns n characters.", inputSchema: { n: z.number().int() } },
    async ({ n }) => text("x".repeat(n)),
  );
  return server;
}

if (!process.argv.includes("--http")) {
  await buildServer().connect(new StdioServerTransport());
} else {
  const transports = new Map();
  const stats = { opened: 0, closed: 0, calls: 0 };
  const http = createServer(async (req, res) => {
    if (req.url === "/stats") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ ...stats, open: transports.size }));
      return;
    }
    const expected = process.env.EXPECTED_TOKEN;
    if (expected && req.headers.authorization !== `Bearer ${expected}`) {
      res.writeHead(401, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: "unauthorized" }));
      return;
    }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString("utf8")) : undefined;
    const sessionId = req.headers["mcp-session-id"];
    let transport = typeof sessionId === "string" ? transports.get(sessionId) : undefined;
    if (!transport) {
      if (req.method !== "POST" || !isInitializeRequest(body)) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(
          JSON.stringify({
            jsonrpc: "2.0",
            error: { code: -32000, message: "no session" },
            id: null,
          }),
        );
        return;
      }
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (id) => {
          stats.opened += 1;
          transports.set(id, created);
        },
      });
      created.onclose = () => {
        if (created.sessionId && transports.delete(created.sessionId)) stats.closed += 1;
      };
      await buildServer().connect(created);
      transport = created;
    }
    if (body?.method === "tools/call") stats.calls += 1;
    await transport.handleRequest(req, res, body);
  });
  http.listen(0, "127.0.0.1", () => {
    process.stdout.write(`PORT ${http.address().port}\n`);
  });
}
