// gRPC workers in a mesh: the adapters service bridges each WorkerService
// session onto the JetStream work queue, so the router that queued a turn
// (here a second router, as the tasks service's would be) answers the
// worker's GetWorkSecrets through NATS — with its agent's vault grants and
// their fingerprints — and a worker asking for an attempt it does not run
// gets PermissionDenied. Real NATS JetStream; the worker is the SDK's
// runGrpcWorker over h2c.
import type * as http2 from "node:http2";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  type AdapterWorker,
  type ExecutionRequest,
  runGrpcWorker,
  type VaultGrant,
} from "@trellis/adapter-sdk";
import { WorkerService } from "@trellis/contracts/adapters";
import {
  createRoutedExecutor,
  createWorkerHandlers,
  NatsWorkerBridge,
  type RoutedExecutor,
  routedNats,
  type WorkerSession,
  WorkerSessions,
} from "@trellis/execution";
import { secretsReaderAdapter } from "@trellis/execution/testing";
import { chatToMessage, textOf } from "@trellis/messages";
import { SecretFingerprints } from "@trellis/runtime";
import { deleteTestStreams, eventually, testNatsUrl, uniqueName } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { keepingSessions, serveWorkerService } from "./support/worker-sessions.js";

describe("gRPC workers through the mesh bridge", () => {
  const prefix = uniqueName("grpcmesh").toLowerCase();
  const env = {
    NATS_URL: testNatsUrl,
    TRELLIS_NATS_PREFIX: prefix,
    TRELLIS_ADAPTERS_WORK_STORAGE: "memory",
  };
  const fingerprints = new SecretFingerprints(new Uint8Array(32).fill(9));
  const access = vi.fn(async (workspaceId: string, agentId: string) => {
    return new Map<string, VaultGrant>([
      ["vlt_a", { allowed: true, secrets: new Map([["token", `${workspaceId}/${agentId}`]]) }],
      ["vlt_b", { allowed: false, reason: "not attached to this agent" }],
    ]);
  });
  let caller: RoutedExecutor;
  let service: RoutedExecutor;
  let sessions: WorkerSessions;
  let server: http2.Http2Server;
  let url: string;
  let worker: AdapterWorker | undefined;
  const attached = new Map<string, WorkerSession>();

  beforeAll(async () => {
    // The router that places the turn and holds the vault access (the tasks service's).
    caller = createRoutedExecutor({
      mode: "distributed",
      env,
      adapters: [],
      vaultAccess: access,
      fingerprints,
    });
    // The adapters service: it serves WorkerService and bridges its sessions.
    service = createRoutedExecutor({ mode: "distributed", env, adapters: [] });
    await Promise.all([caller.start(), service.start()]);
    const bridge = new NatsWorkerBridge({
      nats: () => routedNats(service),
    });
    // The bridge, with the sessions it is given kept (to forge a request with one).
    sessions = new WorkerSessions({ port: keepingSessions(bridge, attached) });
    ({ server, url } = await serveWorkerService(createWorkerHandlers(sessions)));
  }, 60_000);

  afterAll(async () => {
    await worker?.stop({ graceMs: 100 });
    sessions?.close();
    server?.close();
    await caller?.stop();
    await service?.stop();
    await deleteTestStreams(prefix);
  }, 30_000);

  it("GetWorkSecrets is answered by the router that queued the turn; others are refused", async () => {
    worker = await runGrpcWorker({
      adapter: secretsReaderAdapter("mesh-secrets"),
      url,
      heartbeatMs: 200,
    });
    await eventually(() => caller.registry.backend("mesh-secrets")?.workers.length === 1, {
      timeoutMs: 15_000,
      what: "the calling router learns the bridged worker over NATS",
    });
    const request: ExecutionRequest = {
      taskId: "tsk_mesh_secrets",
      sessionId: "ses_mesh",
      workspaceId: "wsp_mesh",
      agent: { id: "agt_mesh", backend: "mesh-secrets", definition: {}, tools: [] },
      history: [],
      input: chatToMessage({ role: "user", content: "read" }),
      signal: new AbortController().signal,
    };
    const result = await caller.router.execute(request);
    expect(result.status, JSON.stringify(result)).toBe("completed");
    const answer = JSON.parse(textOf(result.messages[0] as never));
    expect(answer).toEqual({
      vlt_a: {
        allowed: true,
        secrets: { token: "wsp_mesh/agt_mesh" },
        fingerprints: { token: fingerprints.of("wsp_mesh/agt_mesh") },
      },
      vlt_b: { allowed: false, reason: "not attached to this agent" },
    });
    expect(access).toHaveBeenCalledWith("wsp_mesh", "agt_mesh");
    expect(access).toHaveBeenCalledTimes(1);

    // A worker asking for an attempt it does not run (finished, or never its own).
    const session = attached.get(worker.workerId);
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: url }));
    const refused = await client
      .getWorkSecrets({
        work: {
          workerId: worker.workerId,
          session: session?.token ?? "",
          executionId: "exe_not_running",
          attempt: 1,
        },
      })
      .catch((e: unknown) => ConnectError.from(e));
    expect(refused).toBeInstanceOf(ConnectError);
    expect((refused as ConnectError).code).toBe(Code.PermissionDenied);
    expect(access).toHaveBeenCalledTimes(1);
  }, 60_000);
});
