// The hostile-input fuzz run (issue 7): Trellis in distributed mode — every
// service its own process on the real Postgres and NATS — gets generated
// malformed requests against REST and RPC (Connect JSON and binary, gRPC,
// gRPC-Web, Connect streaming, raw HTTP/1). Passing means: no 5xx, every
// refusal carries the Harn error envelope (REST) or a Connect error with a
// trellis.core.v1.ErrorDetail (RPC), no request hangs, and no process died
// or restarted.
//
//   TRELLIS_FUZZ_COUNT   requests (default 10 000; a nightly run can ask for more)
//   TRELLIS_FUZZ_SEED    seed (default 20261122); case i of a seed is always the same request
//   TRELLIS_FUZZ_ONLY    comma-separated case numbers to replay alone
//   TRELLIS_FUZZ_CONCURRENCY  requests in flight (default 12)
//   TRELLIS_FUZZ_TRACE   print every case's outcome and timing (with TRELLIS_FUZZ_ONLY, to bisect)
// The report (every failure with its request, counts per outcome) is written
// to <mesh log dir>/fuzz-report.json and its path printed.
import { once } from "node:events";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { create, type DescService, type MessageInitShape, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ClaimWorkRequestSchema, ReportWorkEventsRequestSchema } from "@trellis/contracts/adapters";
import { AgentService } from "@trellis/contracts/tasks";
import { harnClient, publicServices, restRoutes } from "@trellis/gateway/testing";
import {
  envelope,
  Http2Wire,
  type RawResponse,
  rpcOutcome,
  sendHttp1,
} from "@trellis/runtime/testing";
import { testGround } from "@trellis/testkit/ground";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHealth, type Mesh, startMesh } from "../../src/mesh.js";
import { allServices } from "../../src/services.js";
import {
  type FuzzCase,
  type FuzzSetup,
  generateCase,
  type Pool,
  type RpcTarget,
  TAKEN_SESSION_ID,
  TAKEN_VAULT_ID,
} from "./cases.js";

// 4,000 in `npm test` (every mutation kind and the handler buckets asserted
// below are reached well before that); TRELLIS_FUZZ_COUNT=10000 or more for a
// deeper run.
const count = Number(process.env.TRELLIS_FUZZ_COUNT ?? 4_000);
const seed = Number(process.env.TRELLIS_FUZZ_SEED ?? 20_261_122);
const only = (process.env.TRELLIS_FUZZ_ONLY ?? "")
  .split(",")
  .filter((s) => s.trim() !== "")
  .map(Number);
const concurrency = Number(process.env.TRELLIS_FUZZ_CONCURRENCY ?? 12);
const apiKey = "trellis-fuzz-admin-key-0123456789";
const protocolVersion = "agents-protocol-2026-04-25";
// Small, so that oversize cases are cheap to send; every process shares it.
const maxBodyBytes = 256 * 1024;

// Connect codes that say "the server failed" (HTTP 5xx in the Connect protocol).
const serverFaults = new Set([Code.Unknown, Code.Internal, Code.DataLoss, Code.Unavailable]);

interface Verdict {
  ok: boolean;
  /** Outcome bucket for the counts (`rpc:InvalidArgument`, `rest:400`, …). */
  bucket: string;
  why?: string;
}

/** Whether `body` is a Harn error envelope (`{"error": {code, message, type, param, request_id}}`). */
function harnEnvelope(body: Buffer): boolean {
  try {
    const error = (JSON.parse(body.toString("utf8")) as { error?: Record<string, unknown> }).error;
    return (
      error !== undefined &&
      typeof error.code === "string" &&
      typeof error.message === "string" &&
      typeof error.type === "string" &&
      "request_id" in error &&
      "param" in error
    );
  } catch {
    return false;
  }
}

function judge(fuzzCase: FuzzCase, res: RawResponse): Verdict {
  if (fuzzCase.surface === "rest") return judgeRest(fuzzCase, res);
  // A path that is no RPC may meet a plain-HTTP handler (an internal service
  // refuses it without service credentials): the Harn envelope is its answer.
  if (fuzzCase.unknownPath && res.status >= 400 && res.status < 500 && harnEnvelope(res.body)) {
    return { ok: true, bucket: `rpc-path:${res.status}` };
  }
  const outcome = rpcOutcome(res);
  if (outcome.kind === "unreadable") {
    return { ok: false, bucket: "rpc:unreadable", why: outcome.why };
  }
  if (outcome.kind === "ok") return { ok: true, bucket: "rpc:ok" };
  const bucket = `rpc:${Code[outcome.code]}`;
  if (outcome.detail === undefined || outcome.detail.reason === "") {
    return { ok: false, bucket, why: `error without ErrorDetail: ${outcome.message}` };
  }
  if (serverFaults.has(outcome.code)) {
    return { ok: false, bucket, why: `server fault ${Code[outcome.code]}: ${outcome.message}` };
  }
  // A served method may refuse an option this deployment lacks (a vault
  // provider it does not have) as `not_implemented`; anything else
  // Unimplemented on a served method is a routing fault.
  if (
    outcome.code === Code.Unimplemented &&
    !fuzzCase.unknownPath &&
    outcome.detail.reason !== "not_implemented"
  ) {
    return { ok: false, bucket, why: `Unimplemented for a served method: ${outcome.message}` };
  }
  if (outcome.code === Code.DeadlineExceeded && !fuzzCase.deadlineSet) {
    return { ok: false, bucket, why: "DeadlineExceeded without a client deadline" };
  }
  // Over Connect a status is HTTP; DeadlineExceeded (504) is the client's own
  // deadline, Unimplemented (501) the deliberate refusal judged above.
  if (
    res.status >= 500 &&
    outcome.code !== Code.DeadlineExceeded &&
    outcome.code !== Code.Unimplemented
  ) {
    return { ok: false, bucket, why: `HTTP ${res.status}` };
  }
  return { ok: true, bucket };
}

/**
 * A typed "try again" because a dependency did not answer (503 /
 * Unavailable, `service_unavailable` or `upstream_unavailable`).
 */
function dependencyUnavailable(res: RawResponse): boolean {
  const outcome = rpcOutcome(res);
  const reason = outcome.kind === "error" ? outcome.detail?.reason : undefined;
  const restCode = /"code":"(service_unavailable|upstream_unavailable)"/.test(
    res.body.toString("utf8"),
  );
  return (
    (res.status === 503 && restCode) ||
    (outcome.kind === "error" &&
      outcome.code === Code.Unavailable &&
      (reason === "service_unavailable" || reason === "upstream_unavailable"))
  );
}

function judgeRest(fuzzCase: FuzzCase, res: RawResponse): Verdict {
  const bucket = `rest:${res.status}`;
  if (res.status >= 500)
    return {
      ok: false,
      bucket,
      why: `HTTP ${res.status}: ${res.body.toString("utf8").slice(0, 300)}`,
    };
  if (fuzzCase.leakStatuses?.includes(res.status))
    return { ok: false, bucket, why: `HTTP ${res.status} leaks another workspace's id` };
  if (res.status < 400) {
    return fuzzCase.mustRefuse !== undefined
      ? { ok: false, bucket, why: `HTTP ${res.status} for ${fuzzCase.mustRefuse}` }
      : { ok: true, bucket };
  }
  const path = fuzzCase.request.path.split("?")[0] ?? "";
  const rest = path === "/v1" || path.startsWith("/v1/");
  let json: unknown;
  try {
    json = JSON.parse(res.body.toString("utf8"));
  } catch {
    return {
      ok: false,
      bucket,
      why: `error body is not JSON: ${res.body.toString("utf8").slice(0, 200)}`,
    };
  }
  const outcome = rpcOutcome(res);
  if (
    rest &&
    res.headers.connection === "close" &&
    outcome.kind === "error" &&
    outcome.message === "malformed HTTP request"
  ) {
    // Node's HTTP parser refused the request (an unknown method, say): it never
    // reached REST routing, and the runtime answered with its typed JSON error.
    return outcome.detail !== undefined
      ? { ok: true, bucket: "rest:parser-refused" }
      : { ok: false, bucket, why: "untyped parser refusal" };
  }
  if (rest) {
    return harnEnvelope(res.body)
      ? { ok: true, bucket }
      : { ok: false, bucket, why: `no error envelope: ${JSON.stringify(json).slice(0, 200)}` };
  }
  // Outside /v1 nothing is REST: the runtime answers with a Connect error.
  return outcome.kind === "error" && outcome.detail !== undefined
    ? { ok: true, bucket }
    : { ok: false, bucket, why: `untyped answer outside /v1: ${JSON.stringify(outcome)}` };
}

async function sendRaw(baseUrl: string, text: string): Promise<string> {
  const url = new URL(baseUrl);
  const socket = net.connect(Number(url.port), url.hostname);
  await once(socket, "connect");
  // Generous: a loaded CI machine can stall a process for seconds.
  socket.setTimeout(30_000, () => socket.destroy(new Error("no answer within 30000 ms")));
  socket.end(text);
  const chunks: Buffer[] = [];
  for await (const chunk of socket) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("latin1");
}

describe("fuzz: malformed requests against a distributed mesh", () => {
  let mesh: Mesh;
  let logDir: string;
  const ground = testGround("fuzz");

  beforeAll(async () => {
    logDir = mkdtempSync(join(tmpdir(), "trellis-fuzz-"));
    mesh = await startMesh({
      ...(await ground.prepare()),
      logDir,
      env: {
        TRELLIS_API_KEY: apiKey,
        TRELLIS_MAX_BODY_BYTES: String(maxBodyBytes),
        TRELLIS_LOG_LEVEL: "warn",
        TRELLIS_SHUTDOWN_GRACE: "1s",
        // One source sends hundreds of bad credentials on purpose; throttled,
        // the valid cases after them would only ever see 429.
        TRELLIS_AUTH_FAILURES_PER_SOURCE: "0",
        // Low enough for a list past it to fit under maxBodyBytes.
        TRELLIS_MAX_RPC_LIST_LENGTH: "1000",
      },
      // Generous: five tsx processes starting on a loaded 2-core machine.
      readyTimeoutMs: 180_000,
    });
  }, 240_000);

  afterAll(async () => {
    await mesh?.stop();
    await ground.remove();
  });

  /** Real resources for the generator to aim at. */
  async function seedPool(gateway: string): Promise<Pool> {
    const harn = harnClient(gateway, apiKey);
    const rest = async (method: string, path: string, body?: unknown) => {
      const res = await harn.request(method, path, {
        version: protocolVersion,
        ...(body === undefined ? {} : { body }),
      });
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${res.text}`);
      return res.json as Record<string, unknown>;
    };
    const definition = {
      entry: "reply",
      nodes: { reply: { update: { messages: [{ role: "assistant", content: "ok" }] } } },
      edges: [{ from: "reply", to: "END" }],
    };
    const agentRes = await fetch(`${gateway}/${AgentService.typeName}/CreateAgent`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
      body: JSON.stringify({ agent: { name: "fuzz-target", backend: "scripted", definition } }),
    });
    const created = (await agentRes.json()) as { agent?: { id?: string } };
    const agentId = created.agent?.id;
    if (agentRes.status !== 200 || agentId === undefined) {
      throw new Error(`CreateAgent: ${agentRes.status} ${JSON.stringify(created)}`);
    }
    const session = await rest("POST", "/v1/sessions", {
      workspace_id: "default",
      persona_id: agentId,
    });
    const sessionId = String(session.id);
    const input = { role: "user", parts: [{ type: "text", text: "hello" }] };
    const task = await rest("POST", `/v1/sessions/${sessionId}/tasks`, { input });
    const artifact = await rest("POST", "/v1/artifacts", {
      kind: "log",
      mime_type: "text/plain",
      name: "seed.log",
      content: "seed",
      session_id: sessionId,
    });
    // Wait for the turn so that messages and events exist.
    let messageId = "msg_none";
    let eventId = "evt_none";
    for (let i = 0; i < 50 && (messageId === "msg_none" || eventId === "evt_none"); i++) {
      const messages = (await rest("GET", `/v1/sessions/${sessionId}/messages`)) as {
        data?: { id: string }[];
      };
      const events = (await rest("GET", `/v1/sessions/${sessionId}/events`)) as {
        data?: { id: string }[];
      };
      messageId = messages.data?.[0]?.id ?? messageId;
      eventId = events.data?.[0]?.id ?? eventId;
      if (messageId === "msg_none" || eventId === "evt_none")
        await new Promise((r) => setTimeout(r, 100));
    }
    // Ids other workspaces' requests reuse (see TAKEN_VAULT_ID, TAKEN_SESSION_ID).
    await rest("POST", "/v1/sessions", { id: TAKEN_SESSION_ID, workspace_id: "default" });
    await rest("POST", "/v1/vaults", {
      id: TAKEN_VAULT_ID,
      workspace_id: "default",
      provider: "trellis",
      capabilities: ["read"],
    });
    return {
      workspaceId: "default",
      agentId,
      sessionId,
      taskId: String(task.id),
      artifactId: String(artifact.id),
      messageId,
      eventId,
    };
  }

  let seeded: Promise<Pool> | undefined;
  const poolOf = (gateway: string) => {
    seeded ??= seedPool(gateway);
    return seeded;
  };

  it(`answers ${only.length > 0 ? only.length : count} generated malformed requests without a 5xx, untyped error, hang or crash`, async () => {
    const gateway = mesh.urls.gateway as string;
    const pool = await poolOf(gateway);

    const rpcTargets: RpcTarget[] = [];
    const owner = new Map<string, string>();
    for (const service of allServices) {
      for (const provided of service.provides)
        owner.set(provided.typeName, mesh.urls[service.name] as string);
    }
    const seen = new Set<DescService>();
    for (const service of [...publicServices, ...allServices.flatMap((s) => s.provides)]) {
      if (seen.has(service)) continue;
      seen.add(service);
      const viaGateway = publicServices.includes(service);
      for (const method of service.methods) {
        if (method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming")
          continue;
        rpcTargets.push({ method, viaGateway, directUrl: owner.get(service.typeName) });
      }
    }
    const setup: FuzzSetup = {
      gatewayUrl: gateway,
      apiKey,
      protocolVersion,
      pool,
      restRoutes: restRoutes.map((r) => ({ method: r.method, path: r.path })),
      rpcTargets,
      maxBodyBytes,
    };

    const pidsBefore = mesh.pids();
    expect(Object.keys(pidsBefore).sort()).toEqual(allServices.map((s) => s.name).sort());

    // Keep-alive, with idle connections dropped by the client (2 s) before the
    // server's own idle timeout (5 s) can race a request on them; sendHttp1
    // resends the one request a reused connection may still lose that way.
    const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency, timeout: 2000 });
    const h2 = new Map<string, Http2Wire>();
    const wireFor = (url: string) => {
      let wire = h2.get(url);
      if (!wire) {
        wire = new Http2Wire(url);
        h2.set(url, wire);
      }
      return wire;
    };

    const indices = only.length > 0 ? only : Array.from({ length: count }, (_, i) => i);
    const buckets = new Map<string, number>();
    const mutationCounts = new Map<string, number>();
    const failures: {
      at: string;
      case: number;
      target: string;
      protocol: string;
      mutations: string[];
      why: string;
      request: string;
    }[] = [];
    const started = Date.now();
    let next = 0;
    // Cases answered "dependency unavailable" once and sent again (see runOne).
    const dependencyRetries: number[] = [];
    // The slowest cases, for the report: where a run's time goes.
    const timings: { case: number; ms: number; generate_ms: number; what: string }[] = [];

    async function runOne(index: number): Promise<void> {
      const caseStarted = Date.now();
      const fuzzCase = generateCase(seed, index, setup);
      const generatedMs = Date.now() - caseStarted;
      for (const m of fuzzCase.mutations)
        mutationCounts.set(
          m.split("-")[0] ?? m,
          (mutationCounts.get(m.split("-")[0] ?? m) ?? 0) + 1,
        );
      let verdict: Verdict;
      try {
        if (fuzzCase.transport === "socket") {
          const answer = await sendRaw(fuzzCase.baseUrl, fuzzCase.raw ?? "");
          const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(answer)?.[1] ?? 0);
          const typed =
            /"code":"[a-z_]+"/.test(answer) && /trellis\.core\.v1\.ErrorDetail/.test(answer);
          verdict =
            status >= 400 && status < 500 && typed
              ? { ok: true, bucket: `raw:${status}` }
              : { ok: false, bucket: `raw:${status}`, why: `raw answer: ${answer.slice(0, 200)}` };
        } else {
          const send = () =>
            fuzzCase.transport === "h2"
              ? wireFor(fuzzCase.baseUrl).send(fuzzCase.request)
              : sendHttp1(fuzzCase.baseUrl, fuzzCase.request, agent);
          let res = await send();
          verdict = judge(fuzzCase, res);
          if (!verdict.ok && dependencyUnavailable(res)) {
            // A dependency (the shared NATS or Postgres of a loaded CI machine)
            // did not answer in time: the typed 503 says so, and it is not the
            // input's doing. The same request once more shows the input's answer.
            dependencyRetries.push(index);
            await new Promise((resolve) => setTimeout(resolve, 500));
            res = await send();
            verdict = judge(fuzzCase, res);
          }
        }
      } catch (error) {
        // A body past the limit may be refused before it is all sent: the
        // server answers 413 and closes, and the client's write then fails.
        const oversized = (fuzzCase.request.body?.length ?? 0) > maxBodyBytes;
        const closedEarly = /EPIPE|ECONNRESET/.test(String(error));
        verdict =
          oversized && closedEarly
            ? { ok: true, bucket: "oversized:closed-early" }
            : { ok: false, bucket: "no-answer", why: String(error) };
      }
      buckets.set(verdict.bucket, (buckets.get(verdict.bucket) ?? 0) + 1);
      const tookMs = Date.now() - caseStarted;
      const what = `${fuzzCase.protocol} ${verdict.bucket} ${fuzzCase.target} ${fuzzCase.mutations.join(" ")}`;
      timings.push({ case: index, ms: tookMs, generate_ms: generatedMs, what });
      if (process.env.TRELLIS_FUZZ_TRACE)
        console.log(
          `case ${index} at ${caseStarted - started}ms took ${tookMs}ms (generate ${generatedMs}ms) ${what}`,
        );
      if (!verdict.ok) {
        const body = fuzzCase.request.body;
        failures.push({
          at: new Date().toISOString(),
          case: index,
          target: fuzzCase.target,
          protocol: fuzzCase.protocol,
          mutations: fuzzCase.mutations,
          why: verdict.why ?? "",
          request: `${fuzzCase.request.method ?? "POST"} ${fuzzCase.request.path.slice(0, 300)} ${JSON.stringify(fuzzCase.request.headers ?? {}).slice(0, 300)} body[${body?.length ?? 0}]=${Buffer.from(
            body ?? [],
          )
            .toString("base64")
            .slice(0, 300)}`,
        });
      }
    }

    await Promise.all(
      Array.from({ length: Math.min(concurrency, indices.length) }, async () => {
        while (next < indices.length) {
          const index = indices[next++] as number;
          await runOne(index);
        }
      }),
    );
    agent.destroy();
    for (const wire of h2.values()) wire.close();
    const elapsedMs = Date.now() - started;

    // No process died or was restarted, and every one still serves.
    const pidsAfter = mesh.pids();
    const health: Record<string, string> = {};
    for (const [name, url] of Object.entries(mesh.urls)) {
      health[name] = await checkHealth(url).catch(
        (error: unknown) => `unreachable: ${String(error)}`,
      );
    }
    const stillWorks = await fetch(`${gateway}/v1/sessions/${pool.sessionId}`, {
      headers: {
        authorization: `Bearer ${apiKey}`,
        "harn-agents-protocol-version": protocolVersion,
      },
    });

    // What the processes logged as their own failures (each is a 5xx somewhere).
    const serverErrors: string[] = [];
    for (const file of readdirSync(logDir).filter((f) => f.endsWith(".log"))) {
      for (const line of readFileSync(join(logDir, file), "utf8").split("\n")) {
        if (/"level":"(error|fatal)"|Uncaught|FATAL|ERR_/.test(line))
          serverErrors.push(`${file}: ${line.slice(0, 400)}`);
      }
    }

    const report = {
      seed,
      count: indices.length,
      elapsed_ms: elapsedMs,
      outcomes: Object.fromEntries([...buckets.entries()].sort()),
      mutations: Object.fromEntries([...mutationCounts.entries()].sort()),
      failures,
      dependency_retries: dependencyRetries,
      generate_ms: timings.reduce((sum, t) => sum + t.generate_ms, 0),
      slowest: timings.sort((a, b) => b.ms - a.ms).slice(0, 20),
      server_errors: serverErrors,
      pids: { before: pidsBefore, after: pidsAfter },
      health,
    };
    const reportFile = join(logDir, "fuzz-report.json");
    writeFileSync(reportFile, JSON.stringify(report, null, 2));
    console.log(
      `fuzz: ${indices.length} requests in ${elapsedMs} ms (${report.generate_ms} ms of it generating them), ${failures.length} failures, ${serverErrors.length} server error log lines; report ${reportFile}\n` +
        JSON.stringify(report.outcomes),
    );

    expect(pidsAfter).toEqual(pidsBefore);
    expect(Object.values(health).every((s) => s === "SERVING")).toBe(true);
    expect(stillWorks.status).toBe(200);
    expect(failures.slice(0, 20)).toEqual([]);
    // Dependencies answering late is load, not input; a run where it is the rule is broken.
    expect(dependencyRetries.length).toBeLessThan(Math.max(10, indices.length / 100));
    expect(serverErrors.slice(0, 20)).toEqual([]);
    // A full run reached the handlers, not only the parsers.
    if (only.length === 0 && count >= 1000) {
      for (const bucket of [
        "rpc:InvalidArgument",
        "rpc:ok",
        "rpc:NotFound",
        "rest:400",
        "rest:404",
        "rest:413",
      ]) {
        expect(buckets.get(bucket) ?? 0, bucket).toBeGreaterThan(0);
      }
    }
  }, 600_000);
  // Issue 22 leftovers: shapes aimed at the A2A JSON-RPC endpoint and the
  // gRPC WorkerService, which the generated cases reach rarely or not at all.
  it("answers hostile shapes on /a2a and WorkerService with typed refusals, and stays responsive", async () => {
    const gateway = mesh.urls.gateway as string;
    const pool = await poolOf(gateway);
    const pidsBefore = mesh.pids();
    const failures: string[] = [];

    // --- /a2a (JSON-RPC over HTTP): a Harn 4xx, or a JSON-RPC error that is not "internal".
    // `mayServe`: a shape with a well-defined answer (a lone surrogate becomes U+FFFD).
    const a2a = async (name: string, body: string, mayServe = false) => {
      const res = await fetch(`${gateway}/a2a/${pool.agentId}`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${apiKey}`,
          "content-type": "application/json",
          "a2a-version": "1.0",
        },
        body,
        signal: AbortSignal.timeout(30_000),
      });
      const text = await res.text();
      let error: { code?: unknown } | undefined;
      try {
        error = (JSON.parse(text) as { error?: { code?: unknown } }).error;
      } catch {
        error = undefined;
      }
      const typed4xx = res.status >= 400 && res.status < 500 && harnEnvelope(Buffer.from(text));
      const rpcError =
        res.status === 200 &&
        typeof error?.code === "number" &&
        error.code !== -32603 &&
        error.code <= -32000;
      const served = mayServe && res.status === 200 && error === undefined;
      if (!typed4xx && !rpcError && !served)
        failures.push(`a2a ${name}: ${res.status} ${text.slice(0, 300)}`);
    };
    const call = (method: string, params: unknown, id: unknown = 1) =>
      JSON.stringify({ jsonrpc: "2.0", id, method, params });
    const message = (text: string, extra: Record<string, unknown> = {}) => ({
      message: { messageId: "m1", role: "ROLE_USER", parts: [{ text }], ...extra },
    });
    const manyKeys = `{${Array.from({ length: 20_000 }, (_, i) => `"k${i}":1`).join(",")}}`;
    const shapes: [string, string, boolean?][] = [
      ["not json", "{not json"],
      ["empty body", ""],
      ["array batch of junk", "[1,2,3]"],
      ["method is a number", JSON.stringify({ jsonrpc: "2.0", id: 1, method: 42 })],
      ["wrong jsonrpc", JSON.stringify({ jsonrpc: "1.0", id: 1, method: "GetTask" })],
      ["id is an object", call("GetTask", { id: "t" }, { a: 1 })],
      ["unknown method", call("DropTables", {})],
      ["params a string", call("GetTask", "task")],
      ["params an array", call("SendMessage", [1, 2])],
      ["task id a number", call("GetTask", { id: 12345 })],
      ["parts not a list", call("SendMessage", { message: { messageId: "m", parts: "hi" } })],
      ["huge params", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":${manyKeys}}`],
      [
        "huge metadata",
        `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}],"metadata":${manyKeys}}}}`,
      ],
      [
        "nested params",
        `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":${"[".repeat(5_000)}${"]".repeat(5_000)}}`,
      ],
      [
        "nested metadata",
        `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hi"}],"metadata":${'{"a":'.repeat(2_000)}1${"}".repeat(2_000)}}}}`,
      ],
      ["NUL text", call("SendMessage", message("a\u0000b"))],
      ["lone surrogate text", call("SendMessage", message("a\ud800b")), true],
      ["NUL message id", call("SendMessage", message("hi", { messageId: "m\u0000" }))],
      ["oversized task id", call("GetTask", { id: "t".repeat(100_000) })],
      ["oversized cancel id", call("CancelTask", { id: "t".repeat(100_000) })],
      [
        "oversized message id",
        call("SendMessage", message("hi", { messageId: "m".repeat(100_000) })),
      ],
      [
        "oversized context id",
        call("SendMessage", message("hi", { contextId: "c".repeat(100_000) })),
      ],
      ["NUL task id", call("GetTask", { id: "t\u0000" })],
      ["body past the limit", call("SendMessage", message("x".repeat(maxBodyBytes + 10)))],
    ];
    for (const [name, body, mayServe] of shapes) await a2a(name, body, mayServe);

    // --- WorkerService over Connect JSON and gRPC: InvalidArgument with an ErrorDetail.
    const wire = new Http2Wire(gateway);
    const worker = async (name: string, method: string, json: string, binary?: Uint8Array) => {
      const path = `/trellis.adapters.v1.WorkerService/${method}`;
      const connect = await sendHttp1(gateway, {
        path,
        headers: { "content-type": "application/json", authorization: `Bearer ${apiKey}` },
        body: Buffer.from(json),
        timeoutMs: 30_000,
      });
      const grpc = binary
        ? await wire.send({
            path,
            headers: {
              "content-type": "application/grpc",
              te: "trailers",
              authorization: `Bearer ${apiKey}`,
            },
            body: envelope(binary),
            timeoutMs: 30_000,
          })
        : undefined;
      for (const [protocol, res] of [
        ["connect", connect],
        ["grpc", grpc],
      ] as const) {
        if (res === undefined) continue;
        const outcome = rpcOutcome(res);
        const ok =
          outcome.kind === "error" &&
          outcome.code === Code.InvalidArgument &&
          outcome.detail?.reason === "invalid_request" &&
          res.status < 500;
        if (!ok)
          failures.push(
            `worker ${name} (${protocol}): ${res.status} ${JSON.stringify(outcome).slice(0, 300)}`,
          );
      }
    };
    const ref = (fields: Record<string, unknown>) => JSON.stringify({ work: fields });
    const claim = (init: MessageInitShape<typeof ClaimWorkRequestSchema>) =>
      toBinary(ClaimWorkRequestSchema, create(ClaimWorkRequestSchema, init));
    await worker(
      "oversized worker id",
      "ClaimWork",
      ref({ workerId: "w".repeat(100_000), executionId: "e" }),
      claim({ work: { workerId: "w".repeat(100_000), executionId: "e" } }),
    );
    await worker(
      "oversized execution id",
      "CompleteWork",
      ref({ workerId: "w", executionId: "e".repeat(10_000) }),
    );
    await worker(
      "NUL worker id",
      "ClaimWork",
      ref({ workerId: "w\u0000", executionId: "e" }),
      claim({ work: { workerId: "w\u0000", executionId: "e" } }),
    );
    await worker("work a string", "ClaimWork", JSON.stringify({ work: "w" }));
    await worker("attempt not a number", "ClaimWork", ref({ attempt: "many" }));
    await worker("events not a list", "ReportWorkEvents", JSON.stringify({ events: 5 }));
    await worker(
      "too many events",
      "ReportWorkEvents",
      JSON.stringify({
        work: { workerId: "w" },
        events: Array.from({ length: 20_000 }, () => ({})),
      }),
      toBinary(
        ReportWorkEventsRequestSchema,
        create(ReportWorkEventsRequestSchema, {
          work: { workerId: "w" },
          events: Array.from({ length: 20_000 }, () => ({})),
        }),
      ),
    );
    await worker(
      "nested junk",
      "ReportWorkEvents",
      `{"events":[${'{"a":'.repeat(3_000)}1${"}".repeat(3_000)}]}`,
    );
    await worker("unknown field", "WorkerHeartbeat", JSON.stringify({ notAField: 1 }));
    await worker(
      "oversized heartbeat id",
      "WorkerHeartbeat",
      JSON.stringify({ workerId: "w".repeat(100_000) }),
    );
    wire.close();

    // Still responsive: a discovery read answers within a generous deadline.
    const probe = await fetch(`${gateway}/v1`, { signal: AbortSignal.timeout(30_000) });
    expect(probe.status).toBe(200);
    expect(mesh.pids()).toEqual(pidsBefore);
    expect(failures).toEqual([]);
  }, 300_000);
});
