/**
 * The hops of one distributed chat turn, counted (not timed): every RPC and
 * internal span from the OpenTelemetry traces the services export, and every
 * PostgreSQL statement and NATS publish each process writes to its sockets
 * (seen with strace). One session, `TRELLIS_HOPS_TURNS` turns (default 20)
 * of a zero-latency scripted agent sent to the gateway one after the other;
 * figures are per turn. `TRELLIS_HOPS_RESTRICTED=1` sends them with an API
 * key restricted to the agent (`agent_ids`), whose turns the gateway checks
 * against the session's agent. Linux with strace, and permission to trace the
 * mesh's processes (they are this process's grandchildren).
 *
 *   npx tsx bench/turn-hops.ts
 *
 * docs/benchmarks.md ("Session 10: hops of a distributed turn") records what
 * it printed. Pollers show up too (a statement that is not per turn, e.g. the
 * mailbox sweep, appears as a fraction per turn).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { ChatService } from "@trellis/contracts/chat";
import { Role } from "@trellis/contracts/core";
import { AgentService } from "@trellis/contracts/tasks";
import { uniqueName } from "@trellis/testkit";
import { startOtlpReceiver } from "@trellis/testkit/otlp-receiver";
import { startBenchMesh } from "./lib/mesh.js";
import { bearerTransport } from "./lib/transport.js";

const API_KEY = "trellis-hops-admin-key-0123456789abcdef";
const kinds = ["", "internal", "server", "client", "producer", "consumer"];
const turns = Number(process.env.TRELLIS_HOPS_TURNS ?? 20);
if (!Number.isInteger(turns) || turns < 1)
  throw new Error("TRELLIS_HOPS_TURNS: a whole number ≥ 1");

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Attach strace to a process: its socket writes go to `file`. */
async function trace(pid: number, file: string): Promise<ChildProcess> {
  const child = spawn(
    "strace",
    [
      "-f",
      "-qq",
      "-s",
      "96",
      "-e",
      "trace=write,writev,sendto,sendmsg",
      "-o",
      file,
      "-p",
      String(pid),
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let err = "";
  child.stderr?.on("data", (c: Buffer) => {
    err += c.toString();
  });
  await sleep(1500);
  if (child.exitCode !== null) throw new Error(`strace -p ${pid} failed: ${err}`);
  return child;
}

/** strace's quoted string, unescaped enough to read (\" → ", \0 → NUL, \n → LF). */
function unquote(text: string): string {
  return text.replace(/\\(["\\]|n|r|t|x[0-9a-f]{2}|[0-7]{1,3})/g, (_m, c: string) => {
    if (c === "n") return "\n";
    if (c === "r") return "\r";
    if (c === "t") return "\t";
    if (c.startsWith("x")) return String.fromCharCode(Number.parseInt(c.slice(1), 16));
    if (/^[0-7]+$/.test(c)) return String.fromCharCode(Number.parseInt(c, 8));
    return c;
  });
}

/**
 * What a process wrote: PostgreSQL statements (Parse or simple Query, by
 * their first words; a Bind alone is a prepared statement run again) and
 * NATS publishes (by subject, ids and sequence numbers left out).
 */
export function classify(text: string): Map<string, number> {
  const out = new Map<string, number>();
  const add = (key: string) => out.set(key, (out.get(key) ?? 0) + 1);
  for (const line of text.split("\n")) {
    const quoted = /"((?:[^"\\]|\\.)*)"/.exec(line);
    if (!quoted) continue;
    const body = unquote(quoted[1] ?? "");
    const kind = body[0];
    // A PostgreSQL frontend message: type byte, then a length whose first byte is 0.
    if ((kind === "P" || kind === "Q" || kind === "B") && body[1] === "\0") {
      let sql = "";
      if (kind === "Q") sql = body.slice(5);
      else if (kind === "P") sql = body.slice(5).replace(/^[^\0]*\0/, ""); // statement name
      sql = sql.replace(/\0.*$/s, "").replace(/\s+/g, " ").trim();
      add(`pg   ${sql ? sql.slice(0, 80) : "(a prepared statement run again)"}`);
      continue;
    }
    const nats = /^(H?PUB) ([^ ]+)/.exec(body);
    if (nats) {
      let subject = nats[2] ?? "";
      if (subject.startsWith("$JS.ACK.")) subject = subject.split(".").slice(0, 4).join(".");
      else
        subject = subject
          .replace(/\.(ses|tsk|task|rcp|rcpt|evt)_[^.]+/g, ".<id>")
          .replace(/_INBOX\..*/, "_INBOX");
      add(`nats ${nats[1]} ${subject}`);
    }
  }
  return out;
}

const receiver = await startOtlpReceiver();
const { mesh, stop } = await startBenchMesh("hops", {
  readyTimeoutMs: 180_000,
  env: {
    TRELLIS_API_KEY: API_KEY,
    TRELLIS_LOG_LEVEL: "warn",
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_TRACES_EXPORTER: "otlp",
    OTEL_METRICS_EXPORTER: "none",
    OTEL_BSP_SCHEDULE_DELAY: "100",
  },
});
const files: string[] = [];
try {
  const transport = bearerTransport(mesh.urls.gateway as string, API_KEY);
  const agents = createClient(AgentService, transport);
  const adminChat = createClient(ChatService, transport);
  const { agent } = await agents.createAgent({
    agent: {
      workspaceId: "default",
      name: "hops",
      backend: "scripted",
      definition: {
        entry: "r",
        nodes: { r: { update: { messages: [{ role: "assistant", content: "ok" }] } } },
      },
    },
  });
  let chat = adminChat;
  if (process.env.TRELLIS_HOPS_RESTRICTED) {
    const created = await fetch(`${mesh.urls.gateway}/v1/api-keys`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${API_KEY}`,
        "content-type": "application/json",
        "harn-agents-protocol-version": "agents-protocol-2026-04-25",
      },
      body: JSON.stringify({ name: "hops-bot", scopes: ["tasks:write"], agent_ids: [agent?.id] }),
    });
    const { key } = (await created.json()) as { key?: string };
    if (!created.ok || !key) throw new Error(`creating the restricted key: ${created.status}`);
    chat = createClient(ChatService, bearerTransport(mesh.urls.gateway as string, key));
  }
  const sessionId = `ses_${uniqueName("h")}`;
  const send = async () => {
    const { outcome } = await chat.send({
      sessionId,
      agentId: agent?.id ?? "",
      message: { role: Role.USER, parts: [{ kind: { case: "text", value: { text: "hi" } } }] },
    });
    if (outcome?.kind.case !== "completed") throw new Error(`turn: ${outcome?.kind.case}`);
  };
  for (let i = 0; i < 3; i++) await send(); // the session exists; caches are warm
  const tracers: [string, ChildProcess, string][] = [];
  for (const [name, pid] of Object.entries(mesh.pids())) {
    const file = join(tmpdir(), `trellis-hops-${process.pid}-${name}.strace`);
    files.push(file);
    tracers.push([name, await trace(pid, file), file]);
  }
  const mark = BigInt(Date.now()) * 1_000_000n;
  for (let i = 0; i < turns; i++) await send();
  await sleep(300);
  for (const [, child] of tracers) child.kill("SIGINT");
  await Promise.all(tracers.map(([, c]) => new Promise((r) => c.once("exit", r))));
  await sleep(1500); // the last spans' batch

  const roots = receiver.spans.filter(
    (s) => s.parentSpanId === "" && s.name.endsWith("ChatService/Send") && s.startNs >= mark,
  );
  const traces = new Set(roots.map((s) => s.traceId));
  const spans = new Map<string, number>();
  for (const s of receiver.spans) {
    if (!traces.has(s.traceId)) continue;
    const key = `${s.service.replace(/^trellis-/, "").padEnd(9)} ${kinds[s.kind]?.padEnd(8)} ${s.name}`;
    spans.set(key, (spans.get(key) ?? 0) + 1);
  }
  const per = (n: number) => (n / roots.length).toFixed(2).padStart(6);
  const who = process.env.TRELLIS_HOPS_RESTRICTED
    ? "a key restricted to the agent"
    : "the admin key";
  console.log(`${roots.length} turns traced (of ${turns}), one session, scripted agent, ${who}`);
  console.log("\nspans per turn (service, kind, name)");
  for (const [key, n] of [...spans].sort()) console.log(`${per(n)}  ${key}`);
  for (const [name, , file] of tracers) {
    const counts = classify(await readFile(file, "utf8"));
    if (counts.size === 0) continue;
    console.log(`\n${name}: socket writes per turn`);
    let pg = 0;
    let nats = 0;
    for (const [key, n] of [...counts].sort((a, b) => b[1] - a[1])) {
      if (key.startsWith("pg")) pg += n;
      else nats += n;
      console.log(`${per(n)}  ${key}`);
    }
    console.log(`${per(pg)}  = PostgreSQL statements;${per(nats)} = NATS publishes`);
  }
} finally {
  await stop();
  await receiver.close();
  if (!process.env.TRELLIS_HOPS_KEEP) for (const f of files) await rm(f, { force: true });
}
