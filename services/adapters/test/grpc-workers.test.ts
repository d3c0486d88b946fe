// gRPC workers in one process (no NATS): the router places executions on a
// worker connected over a real h2c WorkerService (the SDK's runGrpcWorker),
// with the JetStream path's semantics — claim fences, cancels, lost workers.
import { spawn } from "node:child_process";
import type * as http2 from "node:http2";
import { fileURLToPath } from "node:url";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  type AdapterWorker,
  capabilitiesToProto,
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  runGrpcWorker,
  type VaultGrant,
} from "@trellis/adapter-sdk";
import {
  ExecutionEventSchema,
  type WorkerChannelRequest,
  type WorkerChannelRequestSchema,
  type WorkerChannelResponse,
  WorkerService,
} from "@trellis/contracts/adapters";
import {
  BackendRegistry,
  createRoutedExecutor,
  createWorkerHandlers,
  LocalWorkerHub,
  Router,
  type WorkerSession,
  WorkerSessions,
} from "@trellis/execution";
import { capabilities, probeAdapter, secretsReaderAdapter } from "@trellis/execution/testing";
import { textOf } from "@trellis/messages";
import { SecretFingerprints } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import {
  executionRequest,
  keepingSessions,
  serveWorkerService,
} from "./support/worker-sessions.js";

describe("gRPC workers (embedded hub)", () => {
  let server: http2.Http2Server;
  let url: string;
  const hub = new LocalWorkerHub({ graceMs: 500, unavailableAfterMs: 1000 });
  // The hub, with the sessions it is given kept (to cut one as a crash would).
  const attached = new Map<string, WorkerSession>();
  const sessions = new WorkerSessions({ port: keepingSessions(hub, attached) });
  // Calls per method, to show what a turn costs on the wire.
  const calls = new Map<string, number>();
  const registry = new BackendRegistry();
  hub.addRegistry(registry);
  const router = new Router({ registry, remote: hub });
  const workers: AdapterWorker[] = [];

  beforeAll(async () => {
    const handlers = createWorkerHandlers(sessions);
    const count = (name: string) => calls.set(name, (calls.get(name) ?? 0) + 1);
    // A channel's calls are counted as the unary calls they stand for.
    const channelCall: Record<string, string> = {
      claim: "claimWork",
      report: "reportWorkEvents",
      complete: "completeWork",
      heartbeat: "workerHeartbeat",
    };
    const counted = Object.fromEntries(
      Object.entries(handlers).map(([name, handler]) => [
        name,
        (...args: unknown[]) => {
          count(name);
          if (name === "workerChannel") {
            const requests = args[0] as AsyncIterable<WorkerChannelRequest>;
            args[0] = (async function* () {
              for await (const call of requests) {
                const unary = channelCall[call.body.case ?? ""];
                if (unary) count(unary);
                yield call;
              }
            })();
          }
          return (handler as (...a: unknown[]) => unknown)(...args);
        },
      ]),
    ) as typeof handlers;
    ({ server, url } = await serveWorkerService(counted));
  });

  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop({ graceMs: 100 });
  });

  afterAll(async () => {
    sessions.close();
    hub.close();
    server.close();
  });

  it("runs an execution on a connected worker: routed, progress, one result", async () => {
    workers.push(
      await runGrpcWorker({ adapter: probeAdapter({ backendId: "g1" }), url, heartbeatMs: 200 }),
    );
    expect(router.backends()).toContain("g1");
    const r = executionRequest("g1", "hello");
    const result = await router.execute(r.value);
    expect(result.status, JSON.stringify(result)).toBe("completed");
    expect(result.messages[0] && textOf(result.messages[0])).toBe("g1 says: hello");
    expect(r.events[0]).toMatchObject({ kind: "routed", backendId: "g1", attempt: 1 });
    expect(r.events.some((e) => e.kind === "text_delta")).toBe(true);
    expect(r.events.filter((e) => e.kind === "turn_finished")).toHaveLength(1);
  });

  it.each([
    ["channel", true],
    ["unary calls", false],
  ])(
    "a short turn is one claim and one CompleteWork carrying its progress, in order (%s)",
    async (_how, channel) => {
      const backendId = channel ? "g9" : "g9u";
      workers.push(
        await runGrpcWorker({
          adapter: probeAdapter({ backendId }),
          url,
          heartbeatMs: 200,
          channel,
        }),
      );
      calls.clear();
      const r = executionRequest(backendId, "folded");
      const result = await router.execute(r.value);
      expect(result.status, JSON.stringify(result)).toBe("completed");
      expect(r.events.map((e) => e.kind)).toEqual([
        "routed",
        "text_delta",
        "step_finished",
        "turn_finished",
      ]);
      expect(r.events[1]).toMatchObject({ text: `${backendId} says: folded` });
      expect(calls.get("claimWork")).toBe(1);
      expect(calls.get("completeWork")).toBe(1);
      expect(calls.get("reportWorkEvents") ?? 0).toBe(0);
      // Over the channel no call opens a stream of its own.
      expect(calls.get("workerChannel") ?? 0).toBe(0);
      expect(calls.get("connectWorker") ?? 0).toBe(0);
    },
  );

  it("the channel answers a bad call with its error (the field named) and stays open", async () => {
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: url }));
    const sent: MessageInitShape<typeof WorkerChannelRequestSchema>[] = [
      {
        callId: 0n,
        body: {
          case: "connect",
          value: {
            worker: {
              schemaVersion: EXECUTION_SCHEMA_VERSION,
              workerId: "chan-1",
              backendId: "g11",
              capabilities: capabilitiesToProto(capabilities()),
              capacity: 1,
              heartbeatIntervalMs: 1000,
            },
          },
        },
      },
    ];
    let push: (() => void) | undefined;
    const requests = (async function* () {
      for (let i = 0; ; i++) {
        while (i >= sent.length) await new Promise<void>((resolve) => (push = resolve));
        yield sent[i] as MessageInitShape<typeof WorkerChannelRequestSchema>;
      }
    })();
    const send = (call: MessageInitShape<typeof WorkerChannelRequestSchema>) => {
      sent.push(call);
      push?.();
    };
    const abort = new AbortController();
    const responses = client
      .workerChannel(requests, { signal: abort.signal })
      [Symbol.asyncIterator]();
    const next = async (): Promise<WorkerChannelResponse> => {
      const r = await responses.next();
      if (r.done) throw new Error("the channel ended");
      return r.value;
    };
    try {
      const first = await next();
      expect(first.body.case).toBe("command");
      const connected = first.body.case === "command" ? first.body.value.command : undefined;
      expect(connected?.case).toBe("connected");
      const { workerId, session } =
        connected?.case === "connected" ? connected.value : { workerId: "", session: "" };
      send({
        callId: 7n,
        body: {
          case: "complete",
          value: {
            work: { workerId, session, executionId: "exe_1", attempt: 1 },
            result: { outcome: { case: "completed", value: {} } },
            events: Array.from({ length: 257 }, () =>
              create(ExecutionEventSchema, { kind: { case: "textDelta", value: { text: "x" } } }),
            ),
          },
        },
      });
      const refused = await next();
      expect(refused.callId).toBe(7n);
      expect(refused.body).toMatchObject({
        case: "error",
        value: { code: Code.InvalidArgument, param: "events" },
      });
      // Still open, and fenced as the unary calls are.
      send({
        callId: 8n,
        body: { case: "heartbeat", value: { workerId, session, inFlight: 0 } },
      });
      const beat = await next();
      expect(beat.callId).toBe(8n);
      expect(beat.body.case).toBe("beat");
      send({
        callId: 9n,
        body: {
          case: "claim",
          value: { work: { workerId, session: "forged", executionId: "exe_1", attempt: 1 } },
        },
      });
      const fenced = await next();
      expect(fenced.callId).toBe(9n);
      expect(fenced.body).toMatchObject({ case: "error", value: { code: Code.NotFound } });
      expect(sessions.live(workerId, session).workerId).toBe(workerId);
    } finally {
      abort.abort();
    }
    // The stream is gone: so is the session.
    await eventually(() => !router.backends().includes("g11"), { what: "the session ended" });
  });

  it("a channel that does not begin with connect is refused (InvalidArgument)", async () => {
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: url }));
    const stream = client.workerChannel(
      (async function* () {
        yield { callId: 1n, body: { case: "heartbeat" as const, value: {} } };
      })(),
    );
    const error = await (async () => {
      for await (const _ of stream) {
        // nothing is expected
      }
    })().catch((e: unknown) => ConnectError.from(e));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.InvalidArgument);
    expect((error as ConnectError).message).toMatch(/first message of a channel must be connect/);
  });

  it("a slow turn's progress is reported while it runs, in order, then CompleteWork", async () => {
    workers.push(
      await runGrpcWorker({
        adapter: defineAdapter({
          backendId: "g10",
          capabilities: capabilities(),
          async run(request) {
            request.onEvent?.({ kind: "text_delta", text: "one" });
            // Seen by the caller before the turn ends.
            await eventually(() => seen.includes("one"), { timeoutMs: 10_000, what: "one" });
            request.onEvent?.({ kind: "text_delta", text: "two" });
            return { status: "completed", messages: [] };
          },
        }),
        url,
        heartbeatMs: 200,
      }),
    );
    const seen: string[] = [];
    calls.clear();
    const r = executionRequest("g10", "x", {
      onEvent: (event) => {
        if (event.kind === "text_delta") seen.push(event.text);
      },
    });
    const result = await router.execute(r.value);
    expect(result.status, JSON.stringify(result)).toBe("completed");
    // "one" reached the caller while the turn ran (the adapter waited for it).
    expect(seen).toEqual(["one", "two"]);
    expect(calls.get("reportWorkEvents")).toBeGreaterThanOrEqual(1);
    expect(calls.get("completeWork")).toBe(1);
  });

  it("CompleteWork refuses more trailing events than one call may carry, naming the field", async () => {
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: url }));
    const error = await client
      .completeWork({
        work: { workerId: "w", session: "s", executionId: "exe_1", attempt: 1 },
        result: { outcome: { case: "completed", value: {} } },
        events: Array.from({ length: 257 }, () =>
          create(ExecutionEventSchema, { kind: { case: "textDelta", value: { text: "x" } } }),
        ),
      })
      .catch((e: unknown) => ConnectError.from(e));
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.InvalidArgument);
    expect((error as ConnectError).message).toMatch(/events: at most 256/);
  });

  it("the command adapter's worker joins over gRPC (--grpc-url) and runs a turn", async () => {
    const root = fileURLToPath(new URL("../../..", import.meta.url));
    const child = spawn(
      process.execPath,
      [
        "--import",
        "tsx",
        "services/adapters/src/command/main.ts",
        "--backend",
        "cmd-g",
        "--grpc-url",
        url,
        "--",
        process.execPath,
        "services/adapters/src/command/examples/echo-agent.mjs",
      ],
      { cwd: root, env: { ...process.env, TRELLIS_LOG_LEVEL: "error" } },
    );
    let out = "";
    child.stdout?.on("data", (chunk) => {
      out += chunk;
    });
    child.stderr?.on("data", (chunk) => {
      out += chunk;
    });
    try {
      await eventually(() => router.backends().includes("cmd-g"), {
        timeoutMs: 60_000,
        what: `the command worker (${out})`,
      });
      const r = executionRequest("cmd-g", "hello");
      const result = await router.execute(r.value);
      expect(result.status, `${JSON.stringify(result)}\n${out}`).toBe("completed");
      const streamed = r.events.map((e) => (e.kind === "text_delta" ? e.text : "")).join("");
      expect(streamed).toBe("echo: hello");
      expect(r.events[0]).toMatchObject({ kind: "routed", backendId: "cmd-g" });
    } finally {
      child.kill("SIGKILL");
    }
  }, 90_000);

  it("refuses a bad registration with InvalidArgument naming the field", async () => {
    await expect(
      runGrpcWorker({
        adapter: probeAdapter({ backendId: "g2" }),
        url,
        heartbeatMs: 5,
      }),
    ).rejects.toThrow(/worker.heartbeat_interval_ms/);
  });

  it("a requirement the worker declares it lacks never reaches it", async () => {
    let runs = 0;
    workers.push(
      await runGrpcWorker({
        adapter: probeAdapter({ backendId: "g3", onRun: () => runs++ }),
        url,
        heartbeatMs: 200,
      }),
    );
    const r = executionRequest("g3", "hi", { requirements: { toolUse: "required" } });
    const result = await router.execute(r.value);
    expect(result).toMatchObject({ status: "failed", category: "unsupported" });
    expect(runs).toBe(0);
  });

  it("a caller's cancel reaches the worker, which ends the run", async () => {
    workers.push(
      await runGrpcWorker({ adapter: probeAdapter({ backendId: "g4" }), url, heartbeatMs: 200 }),
    );
    const r = executionRequest("g4", "sleep 10000");
    const running = router.execute(r.value);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const started = Date.now();
    r.abort.abort();
    const result = await running;
    expect(result.status).toBe("cancelled");
    // Well before the 10 s sleep would end: the cancel ended it (not a timing bound).
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it("a stale or foreign call is refused by the fence", async () => {
    const worker = await runGrpcWorker({
      adapter: probeAdapter({ backendId: "g5" }),
      url,
      heartbeatMs: 200,
    });
    workers.push(worker);
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: url }));
    await expect(
      client.claimWork({
        work: { workerId: worker.workerId, session: "forged", executionId: "exe_1", attempt: 1 },
      }),
    ).rejects.toThrow(/no live session/);
  });

  it("gives a running attempt's worker its agent's vault grants, and no one else", async () => {
    const access = vi.fn(async (workspaceId: string, agentId: string) => {
      return new Map<string, VaultGrant>([
        ["vlt_a", { allowed: true, secrets: new Map([["token", `${workspaceId}/${agentId}`]]) }],
        ["vlt_b", { allowed: false, reason: "not attached to this agent" }],
      ]);
    });
    const fingerprints = new SecretFingerprints(new Uint8Array(32).fill(7));
    const routed = createRoutedExecutor({
      mode: "embedded",
      env: {},
      adapters: [],
      workerHub: hub,
      vaultAccess: access,
      fingerprints,
    });
    await routed.start();
    try {
      const worker = await runGrpcWorker({
        adapter: secretsReaderAdapter("g11"),
        url,
        heartbeatMs: 200,
      });
      workers.push(worker);
      await eventually(() => routed.registry.backend("g11")?.workers.length === 1, {
        timeoutMs: 10_000,
        what: "the router knows g11",
      });
      const result = await routed.router.execute(executionRequest("g11", "x").value);
      expect(result.status, JSON.stringify(result)).toBe("completed");
      const answer = JSON.parse(textOf(result.messages[0] as never));
      expect(answer).toEqual({
        vlt_a: {
          allowed: true,
          secrets: { token: "wsp_1/agt_1" },
          fingerprints: { token: fingerprints.of("wsp_1/agt_1") },
        },
        vlt_b: { allowed: false, reason: "not attached to this agent" },
      });
      expect(access).toHaveBeenCalledWith("wsp_1", "agt_1");
      // A live session that does not run the attempt gets nothing.
      const client = createClient(WorkerService, createGrpcTransport({ baseUrl: url }));
      const session = attached.get(worker.workerId) as WorkerSession;
      const refused = await client
        .getWorkSecrets({
          work: {
            workerId: worker.workerId,
            session: session.token,
            executionId: "exe_not_running",
            attempt: 1,
          },
        })
        .catch((e: unknown) => ConnectError.from(e));
      expect((refused as ConnectError).code).toBe(Code.PermissionDenied);
      expect(access).toHaveBeenCalledTimes(1);
    } finally {
      await routed.stop();
    }
  });

  it.each([
    { safeToRetry: true, expected: "completed" },
    { safeToRetry: false, expected: "worker_lost" },
  ])(
    "a lost worker (lease gone mid-run): safe to retry $safeToRetry → $expected",
    async ({ safeToRetry }) => {
      const backendId = safeToRetry ? "g6" : "g7";
      const adapter = probeAdapter({ backendId });
      const first = await runGrpcWorker({ adapter, url, heartbeatMs: 100 });
      workers.push(first);
      const r = executionRequest(backendId, "sleep 600", {
        agent: { id: "agt_2", backend: backendId, definition: {}, tools: [], safeToRetry },
      });
      const running = router.execute(r.value);
      await new Promise((resolve) => setTimeout(resolve, 200));
      workers.push(await runGrpcWorker({ adapter, url, heartbeatMs: 100 }));
      // As after a crash or a missed lease: the first worker's session ends mid-run.
      const lost = attached.get(first.workerId) as WorkerSession;
      sessions.end(lost, "lost");
      const result = await running;
      const routed = r.events.filter((e) => e.kind === "routed");
      if (safeToRetry) {
        expect(result.status, JSON.stringify(result)).toBe("completed");
        expect(routed.map((e) => e.kind === "routed" && e.attempt)).toEqual([1, 2]);
        expect(routed[1]).not.toMatchObject({ workerId: first.workerId });
      } else {
        expect(result).toMatchObject({ status: "failed", category: "worker_lost" });
        expect(routed).toHaveLength(1);
      }
      // The SDK worker connects again, as a new session of the same worker id.
      for (let i = 0; i < 50 && attached.get(first.workerId) === lost; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const again = attached.get(first.workerId);
      expect(again && again !== lost && !again.ended).toBe(true);
    },
  );
});
