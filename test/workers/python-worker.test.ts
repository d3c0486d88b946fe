// A Python worker built only from the generated stubs (clients/python) serves
// chat turns through the gateway of `trellis dev` (embedded mode) and of a
// distributed mesh (every service its own process, real Postgres and NATS):
// a turn end to end, a refused requirement, a turn canceled mid-way, and a
// worker killed with SIGKILL mid-turn — its turn runs again on the other
// worker (safe to retry) or fails `worker_lost` (not safe); refusals arrive
// typed (ChatTurnErrored.blocking), also for a turn's own requirements.
// `trellis adapters conformance` passes for it, for scripted and for the Go
// twin (clients/go/examples/echo_worker), and fails a lying backend naming the
// item. The Go twin passes conformance in the mesh, and runs a chat turn and
// the two kill -9 cases against the dev host.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, type JsonObject } from "@bufbuild/protobuf";
import { type Client, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { Requirement } from "@trellis/contracts/adapters";
import { ChatService } from "@trellis/contracts/chat";
import { MessageSchema, Role } from "@trellis/contracts/core";
import { AgentService, TaskService } from "@trellis/contracts/tasks";
import { createTestDatabase, deleteTestStreams, testNatsUrl, uniqueName } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startMesh } from "../../src/mesh.js";
import { startTrellisDev } from "../support/trellis-dev.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const python = ["/usr/bin/python3", "python3"].find(
  (candidate) =>
    spawnSync(candidate, ["-c", "import grpc, google.protobuf"], { encoding: "utf8" }).status === 0,
);
if (!python) console.warn("workers: no python3 with grpcio; the Python worker test is skipped");

interface PyWorker {
  child: ChildProcess;
  lines: Array<Record<string, unknown>>;
  output(): string;
  waitFor(
    match: (line: Record<string, unknown>) => boolean,
    what: string,
  ): Promise<Record<string, unknown>>;
}

function startWorker(
  url: string,
  keyFile: string,
  workerId: string,
  command: readonly string[] = [
    python as string,
    "clients/python/examples/echo_worker.py",
    "--backend",
    "py-echo",
    "--word-delay",
    "0.05",
  ],
): PyWorker {
  const [program, ...args] = command as [string, ...string[]];
  const child = spawn(program, [...args, "--worker-id", workerId, "--heartbeat-ms", "1000"], {
    cwd: root,
    env: { ...process.env, TRELLIS_URL: url, TRELLIS_API_KEY_FILE: keyFile },
  });
  const lines: Array<Record<string, unknown>> = [];
  let out = "";
  let err = "";
  let partial = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk;
    partial += chunk;
    const parts = partial.split("\n");
    partial = parts.pop() ?? "";
    for (const line of parts) if (line.trim()) lines.push(JSON.parse(line));
  });
  child.stderr?.on("data", (chunk) => {
    err += chunk;
  });
  const output = () => `${out}\n${err}`;
  return {
    child,
    lines,
    output,
    async waitFor(match, what) {
      const deadline = Date.now() + 20_000;
      for (;;) {
        const found = lines.find(match);
        if (found) return found;
        if (Date.now() > deadline || child.exitCode !== null) {
          throw new Error(`worker ${workerId}: no ${what}:\n${output()}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    },
  };
}

const text = (value: string) =>
  create(MessageSchema, {
    role: Role.USER,
    parts: [{ kind: { case: "text", value: { text: value } } }],
  });
const json = (value: unknown) =>
  JSON.stringify(value, (_key, v) => (typeof v === "bigint" ? String(v) : v));
const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i}`).join(" ");

// The Go twin (clients/go/examples/echo_worker), when Debian's Go and grpc sources are there.
const goPath = "/usr/share/gocode";
const haveGo =
  spawnSync("sh", ["-c", "command -v go"]).status === 0 &&
  existsSync(join(goPath, "src/google.golang.org/grpc")) &&
  existsSync(join(goPath, "src/google.golang.org/protobuf"));
if (!haveGo) console.warn("workers: no Go toolchain with grpc sources; the Go worker is skipped");

/** Build the Go echo worker (GOPATH mode, offline); returns its binary. */
function buildGoWorker(): string {
  const gopath = mkdtempSync(join(tmpdir(), "trellis-gopath-"));
  mkdirSync(join(gopath, "src/trellis.dev/clients"), { recursive: true });
  symlinkSync(join(root, "clients/go"), join(gopath, "src/trellis.dev/clients/go"));
  const binary = join(gopath, "echo_worker");
  const built = spawnSync(
    "go",
    ["build", "-o", binary, "trellis.dev/clients/go/examples/echo_worker"],
    {
      cwd: root,
      encoding: "utf8",
      env: {
        ...process.env,
        GO111MODULE: "off",
        GOPATH: `${gopath}:${goPath}`,
        GOCACHE: join(root, "node_modules/.cache/trellis-clients/go-build"),
        GOFLAGS: "",
      },
    },
  );
  if (built.status !== 0) throw new Error(`go build failed:\n${built.stderr}`);
  return binary;
}

/** `trellis adapters conformance` against `url`; its exit code and output. */
async function conformance(
  url: string,
  keyFile: string,
  args: string[],
): Promise<{ code: number | null; out: string }> {
  const child = spawn(
    process.execPath,
    [
      join(root, "bin/trellis.js"),
      "adapters",
      "conformance",
      "--url",
      url,
      "--api-key",
      readFileSync(keyFile, "utf8").trim(),
      ...args,
    ],
    { cwd: root },
  );
  let out = "";
  child.stdout?.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    out += chunk;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  return { code, out };
}

/** A running Trellis: the gateway's URL and a file holding the admin key. */
interface Host {
  url: string;
  keyFile: string;
  stop(): Promise<void>;
}

async function startDev(): Promise<Host> {
  const server = await startTrellisDev(
    { TRELLIS_API_KEY: "" },
    (dataDir) => existsSync(join(dataDir, "data", "admin-api-key")),
    // A loaded machine (CI runners, shared hosts) may take longer than a minute.
    150_000,
  );
  return {
    url: server.url,
    keyFile: join(server.dataDir, "data", "admin-api-key"),
    stop: () => server.stop(),
  };
}

async function startDistributed(): Promise<Host> {
  const db = await createTestDatabase("trellis_pyworker");
  const prefix = uniqueName("pyworker");
  const key = `trellis-pyworker-admin-${uniqueName("k")}-0123456789abcdef`;
  const dir = mkdtempSync(join(tmpdir(), "trellis-pyworker-"));
  const keyFile = join(dir, "admin-api-key");
  writeFileSync(keyFile, key);
  const mesh = await startMesh({
    databaseUrl: db.url,
    natsUrl: testNatsUrl,
    natsPrefix: prefix,
    adapterWorkers: 0,
    logDir: join(dir, "logs"),
    readyTimeoutMs: 150_000,
    env: { TRELLIS_API_KEY: key, TRELLIS_ADAPTERS_WORK_STORAGE: "memory" },
  });
  return {
    url: mesh.urls.gateway as string,
    keyFile,
    async stop() {
      await mesh.stop();
      await db.drop();
      await deleteTestStreams(prefix);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe.skipIf(!python).each([
  { mode: "trellis dev (embedded)", start: startDev },
  { mode: "the distributed mesh", start: startDistributed },
])("a Python gRPC worker against $mode", ({ mode, start }) => {
  let host: Host;
  let keyFile: string;
  let agents: Client<typeof AgentService>;
  let chat: Client<typeof ChatService>;
  let tasks: Client<typeof TaskService>;
  const workers: PyWorker[] = [];

  beforeAll(async () => {
    host = await start();
    keyFile = host.keyFile;
    const key = readFileSync(keyFile, "utf8").trim();
    const transport = createGrpcTransport({
      baseUrl: host.url,
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${key}`);
          return next(req);
        },
      ],
    });
    agents = createClient(AgentService, transport);
    chat = createClient(ChatService, transport);
    tasks = createClient(TaskService, transport);
    workers.push(startWorker(host.url, keyFile, "py-a"));
    await workers[0]?.waitFor((l) => l.step === "connected", "connection");
  }, 180_000);

  afterAll(async () => {
    for (const w of workers) w.child.kill("SIGKILL");
    await host?.stop();
  }, 60_000);

  const agent = async (safeToRetry: boolean, backend = "py-echo") =>
    (
      await agents.createAgent({
        agent: { name: backend, backend, safeToRetry, definition: {} as JsonObject },
      })
    ).agent?.id as string;

  it("runs a chat turn end to end, streamed by the worker", async () => {
    const agentId = await agent(false);
    const chunks: string[] = [];
    let outcome: unknown;
    for await (const res of chat.sendStreaming({
      sessionId: `ses_py_${Date.now()}`,
      agentId,
      message: text("hello from the gateway"),
    })) {
      if (res.kind.case === "chunk" && res.kind.value.kind.case === "textDelta") {
        chunks.push(res.kind.value.kind.value.text);
      }
      if (res.kind.case === "outcome") outcome = res.kind.value;
    }
    const completed = (outcome as { kind: { case: string; value: { replies: unknown[] } } }).kind;
    expect(completed.case, json(outcome)).toBe("completed");
    expect(chunks.join("")).toBe("echo: hello from the gateway");
    expect(json(completed.value.replies)).toContain("echo: hello from the gateway");
    const w = workers[0] as PyWorker;
    const done = await w.waitFor(
      (l) => l.step === "completed" && l.accepted === true,
      "an accepted result",
    );
    // Progress is batched: the last delta rides on CompleteWork (trailing events).
    expect(done.trailing_events, json(done)).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it("refuses what it cannot do: a requirement it lacks never reaches it", async () => {
    // Attachments are not something this backend declares: routing says so
    // before any offer (a typed refusal, not a silent fallback).
    const agentId = await agent(false);
    const before = (workers[0] as PyWorker).lines.filter((l) => l.step === "offer").length;
    const res = await chat.send({
      sessionId: `ses_py_att_${Date.now()}`,
      agentId,
      message: create(MessageSchema, {
        role: Role.USER,
        parts: [
          { kind: { case: "text", value: { text: "look" } } },
          {
            kind: {
              case: "image",
              value: { source: { case: "url", value: "https://example.com/a.png" } },
            },
          },
        ],
      }),
    });
    const outcome = res.outcome?.kind;
    expect(outcome?.case, json(res.outcome)).toBe("errored");
    expect((workers[0] as PyWorker).lines.filter((l) => l.step === "offer").length).toBe(before);
    // Typed, not only text: which backend, which capability, which code.
    const blocking = outcome?.case === "errored" ? outcome.value.blocking : undefined;
    expect(blocking?.category, json(res.outcome)).toBe("unsupported");
    expect(blocking?.reasons).toContainEqual(
      expect.objectContaining({
        backendId: "py-echo",
        capability: "attachments",
        code: "attachments_unsupported",
        severity: "blocking",
      }),
    );
    // A requirement of this turn alone (the agent has none): refused before
    // any task exists, with the same typed reasons.
    const narrowed = await chat.send({
      sessionId: `ses_py_req_${Date.now()}`,
      agentId,
      message: text("pause for my approval"),
      requirements: { approvalInterrupts: Requirement.REQUIRED },
    });
    const refused = narrowed.outcome?.kind;
    expect(refused?.case, json(narrowed.outcome)).toBe("errored");
    expect(narrowed.outcome?.taskId).toBe("");
    expect(refused?.case === "errored" ? refused.value.blocking?.reasons : []).toContainEqual(
      expect.objectContaining({ backendId: "py-echo", capability: "approval_interrupts" }),
    );
    expect((workers[0] as PyWorker).lines.filter((l) => l.step === "offer").length).toBe(before);
  }, 30_000);

  // A client in Python decodes the refusal's typed reasons from the generated
  // stubs alone (RpcStatus → BlockingReasons). Once: the mesh relays the
  // same error.
  it.runIf(mode === "trellis dev (embedded)")(
    "a Python client reads a refused submit's BlockingReasons from the stubs",
    async () => {
      const agentId = await agent(false);
      const run = spawnSync(
        python as string,
        [
          "clients/python/examples/typed_refusal.py",
          "--agent-id",
          agentId,
          "--require",
          "approval_interrupts",
        ],
        {
          cwd: root,
          encoding: "utf8",
          timeout: 60_000,
          env: { ...process.env, TRELLIS_URL: host.url, TRELLIS_API_KEY_FILE: keyFile },
        },
      );
      expect(run.status, `${run.stdout}\n${run.stderr}`).toBe(0);
      const printed = JSON.parse(run.stdout.trim());
      expect(printed).toMatchObject({
        refused: true,
        code: "FAILED_PRECONDITION",
        reason: "agent_blocked",
        category: "unsupported",
        omitted: 0,
      });
      expect(printed.blocking).toEqual([
        {
          backend_id: "py-echo",
          capability: "approval_interrupts",
          code: "approval_interrupt_unsupported",
          severity: "blocking",
        },
      ]);
    },
    60_000,
  );

  it("is canceled mid-turn: the worker gets the cancel and ends the turn", async () => {
    const agentId = await agent(false);
    const sessionId = `ses_py_cancel_${Date.now()}`;
    const stream = chat.sendStreaming({ sessionId, agentId, message: text(words(400)) });
    const iterator = stream[Symbol.asyncIterator]();
    const first = await iterator.next();
    expect(first.done).toBe(false);
    const listed = await tasks.listTasks({ sessionId });
    const taskId = listed.tasks[0]?.id as string;
    await tasks.cancelTask({ taskId, reason: "test cancels" });
    let outcome: unknown;
    for (;;) {
      const next = await iterator.next();
      if (next.done) break;
      if (next.value.kind.case === "outcome") outcome = next.value.kind.value;
    }
    expect(json(outcome)).not.toContain("w399");
    const w = workers[0] as PyWorker;
    await w.waitFor((l) => l.step === "cancel", "cancel command");
    await w.waitFor((l) => l.step === "cancelled", "cancelled turn");
    const task = await tasks.getTask({ taskId });
    expect(String(task.task?.status)).not.toBe("");
  }, 30_000);

  // Conformance goes through the public API only: one host shows it (CI time).
  it.runIf(mode === "trellis dev (embedded)")(
    "trellis adapters conformance passes for the Python backend and the scripted one",
    async () => {
      const python = await conformance(host.url, keyFile, [
        "--backend",
        "py-echo",
        "--slow-input",
        words(120),
      ]);
      expect(python.code, python.out).toBe(0);
      for (const item of [
        "registered",
        "blocks",
        "degrades",
        "pure",
        "completes",
        "streams",
        "refuses",
        "timeout",
        "cancel",
      ]) {
        expect(python.out).toMatch(new RegExp(`PASS +${item} `));
      }
      const scripted = await conformance(host.url, keyFile, [
        "--backend",
        "scripted",
        "--definition",
        JSON.stringify({
          entry: "a",
          nodes: { a: { update: { messages: [{ role: "assistant", content: "hi there" }] } } },
          edges: [{ from: "a", to: "END" }],
        }),
      ]);
      expect(scripted.code, scripted.out).toBe(0);
      expect(scripted.out).toMatch(/PASS +completes +replied "hi there"/);
    },
    90_000,
  );

  // Conformance goes through the public API only: one host shows it (CI time).
  it.runIf(mode === "trellis dev (embedded)")(
    "trellis adapters conformance fails a lying backend, naming the item",
    async () => {
      const liar = spawn(process.execPath, ["--import", "tsx", "test/workers/lying-worker.ts"], {
        cwd: root,
        env: {
          ...process.env,
          TRELLIS_WORKER_URL: host.url,
          TRELLIS_API_KEY: readFileSync(keyFile, "utf8").trim(),
        },
      });
      try {
        let out = "";
        liar.stdout?.on("data", (chunk) => {
          out += chunk;
        });
        const deadline = Date.now() + 60_000;
        while (!out.includes("ready") && Date.now() < deadline && liar.exitCode === null) {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(out).toContain("ready");
        const result = await conformance(host.url, keyFile, ["--backend", "liar"]);
        expect(result.code, result.out).toBe(1);
        expect(result.out).toMatch(
          /FAIL +streams +declares native streaming but sent no text deltas/,
        );
        expect(result.out).toContain("FAILED: streams");
      } finally {
        liar.kill("SIGKILL");
      }
    },
    90_000,
  );

  // The command and harness backends, joined over gRPC as a backend author
  // would run them next to `trellis dev` (checked against the dev host).
  it.runIf(mode === "trellis dev (embedded)").each([
    {
      backend: "cmd-echo",
      // The command adapter's worker (--grpc-url) running the example
      // line-protocol program; "sleep <ms>" is its slow input.
      args: [
        "services/adapters/src/command/main.ts",
        "--backend",
        "cmd-echo",
        "--grpc-url",
        "{url}",
        "--",
        process.execPath,
        "services/adapters/src/command/examples/echo-agent.mjs",
      ],
      conformance: ["--slow-input", "sleep 20000"],
      passes: ["registered", "blocks", "degrades", "pure", "completes", "streams", "refuses"],
    },
    {
      backend: "harness-rec",
      // The built-in harness before a local provider stub (recorded answer).
      args: ["test/workers/harness-grpc-worker.ts"],
      conformance: [
        "--definition",
        JSON.stringify({ provider: "openai", model: "gpt-4o-mini", stream: true }),
        "--slow-input",
        "please be slow",
      ],
      passes: ["registered", "blocks", "pure", "completes", "streams"],
    },
  ])(
    "trellis adapters conformance passes for the $backend backend",
    async (c) => {
      const child = spawn(
        process.execPath,
        ["--import", "tsx", ...c.args.map((a) => (a === "{url}" ? host.url : a))],
        {
          cwd: root,
          env: {
            ...process.env,
            TRELLIS_WORKER_URL: host.url,
            TRELLIS_API_KEY: readFileSync(keyFile, "utf8").trim(),
            TRELLIS_LOG_LEVEL: "error",
          },
        },
      );
      try {
        let out = "";
        child.stdout?.on("data", (chunk) => {
          out += chunk;
        });
        child.stderr?.on("data", (chunk) => {
          out += chunk;
        });
        const deadline = Date.now() + 60_000;
        while (!out.includes("ready") && Date.now() < deadline && child.exitCode === null) {
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(out).toContain("ready");
        const result = await conformance(host.url, keyFile, [
          "--backend",
          c.backend,
          ...c.conformance,
        ]);
        expect(result.code, `${result.out}\n${out}`).toBe(0);
        for (const item of [...c.passes, "timeout", "cancel"]) {
          expect(result.out).toMatch(new RegExp(`PASS +${item} `));
        }
      } finally {
        child.kill("SIGKILL");
      }
    },
    120_000,
  );

  // In the mesh only: against the dev host the Go worker runs the chat and
  // kill -9 cases below, and the protocol is the same.
  it.runIf(haveGo && mode === "the distributed mesh")(
    "Go: the same worker from the Go stubs passes conformance (turn, stream, cancel, timeout)",
    async () => {
      const go = startWorker(host.url, keyFile, `go-a-${Date.now()}`, [
        buildGoWorker(),
        "-backend",
        "go-echo",
        "-word-delay",
        "50ms",
      ]);
      workers.push(go);
      await go.waitFor((l) => l.step === "connected", "connection");
      const result = await conformance(host.url, keyFile, [
        "--backend",
        "go-echo",
        "--slow-input",
        words(120),
      ]);
      expect(result.code, `${result.out}\n${go.output()}`).toBe(0);
      for (const item of ["completes", "streams", "refuses", "timeout", "cancel"]) {
        expect(result.out).toMatch(new RegExp(`PASS +${item} `));
      }
      await go.waitFor((l) => l.step === "cancel", "a cancel command");
      // The kill -9 cases below count Python workers only.
      workers.splice(workers.indexOf(go), 1);
      go.child.kill("SIGKILL");
    },
    180_000,
  );

  // The Go twin end to end: a chat turn, then kill -9 mid-turn — retried on
  // the other worker (safe to retry) or worker_lost. Against the dev host
  // only: the mesh path is the Python worker's, and the Go worker speaks the
  // same protocol (its conformance above runs in both modes).
  it.runIf(haveGo && mode === "trellis dev (embedded)")(
    "Go: a chat turn end to end; after kill -9 retried (safe) or worker_lost",
    async () => {
      const binary = buildGoWorker();
      const pool: PyWorker[] = [];
      const startGo = (id: string) =>
        startWorker(host.url, keyFile, `${id}-${Date.now()}`, [
          binary,
          "-backend",
          "go-kill",
          "-word-delay",
          "50ms",
        ]);
      try {
        // Three: two for the retry, and two still alive for the worker_lost case.
        pool.push(startGo("go-k1"), startGo("go-k2"), startGo("go-k3"));
        await Promise.all(pool.map((w) => w.waitFor((l) => l.step === "connected", "connection")));
        const turn = await chat.send({
          sessionId: `ses_go_${Date.now()}`,
          agentId: await agent(false, "go-kill"),
          message: text("hello from go"),
        });
        expect(turn.outcome?.kind.case, json(turn.outcome)).toBe("completed");
        expect(json(turn.outcome)).toContain("echo: hello from go");

        const retried = await killMidTurn(true, pool, "go-kill");
        expect(retried.res.outcome?.kind.case, json(retried.res.outcome)).toBe("completed");
        expect(json(retried.res.outcome)).toContain("w59");
        // The worker logs its line after CompleteWork returns, so the reply
        // can reach us first: wait for the line on a survivor.
        const survivors = pool.filter((w) => w !== retried.victim && w.child.exitCode === null);
        await Promise.any(
          survivors.map((w) =>
            w.waitFor((l) => l.step === "completed" && l.attempt === 2, "the retried attempt"),
          ),
        );

        const lost = await killMidTurn(false, pool, "go-kill");
        expect(lost.res.outcome?.kind.case, json(lost.res.outcome)).toBe("errored");
        expect(json(lost.res.outcome)).toContain("worker_lost");
      } finally {
        for (const w of pool) w.child.kill("SIGKILL");
      }
    },
    150_000,
  );

  async function killMidTurn(safeToRetry: boolean, pool = workers, backend = "py-echo") {
    // Two workers; the one that claims the turn dies with SIGKILL.
    if (pool === workers && workers.length < 2) {
      workers.push(startWorker(host.url, keyFile, "py-b"));
      await workers[1]?.waitFor((l) => l.step === "connected", "connection");
    }
    const agentId = await agent(safeToRetry, backend);
    // Only a claim of this turn counts.
    for (const w of pool) for (const l of w.lines) if (l.step === "claim") l.seen = true;
    const reply = chat.send({
      sessionId: `ses_py_kill_${Date.now()}`,
      agentId,
      message: text(words(60)),
    });
    const deadline = Date.now() + 20_000;
    let victim: PyWorker | undefined;
    while (!victim && Date.now() < deadline) {
      victim = pool.find(
        (w) =>
          w.child.exitCode === null &&
          w.lines.some((l) => l.step === "claim" && l.granted === true && !l.seen),
      );
      if (!victim) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(victim, pool.map((w) => w.output()).join("\n---\n")).toBeDefined();
    (victim as PyWorker).child.kill("SIGKILL");
    const res = await reply;
    return { res, victim: victim as PyWorker };
  }

  it("after kill -9 a safe-to-retry turn runs again on the other worker", async () => {
    const { res, victim } = await killMidTurn(true);
    expect(res.outcome?.kind.case, json(res.outcome)).toBe("completed");
    expect(json(res.outcome)).toContain("w59");
    const survivor = workers.find((w) => w !== victim && w.child.exitCode === null) as PyWorker;
    await survivor.waitFor((l) => l.step === "completed" && l.attempt === 2, "the retried attempt");
    // Keep two workers for the next case.
    const replacement = startWorker(host.url, keyFile, `py-c-${Date.now()}`);
    workers.push(replacement);
    await replacement.waitFor((l) => l.step === "connected", "connection");
  }, 60_000);

  it("after kill -9 a turn that is not safe to retry fails worker_lost", async () => {
    const { res } = await killMidTurn(false);
    const outcome = res.outcome?.kind;
    expect(
      outcome?.case,
      `${json(res.outcome)}\n${workers.map((w) => w.output()).join("\n---\n")}`,
    ).toBe("errored");
    expect(json(res.outcome)).toContain("worker_lost");
  }, 60_000);
});
