// gRPC workers in a mesh (real NATS): the router (a JetStream dispatcher, as
// the tasks service runs it) places executions directly on the sessions the
// adapters service holds — core NATS to the session's offer subject, no
// work-queue stream, no pull, no ack — with the JetStream path's claims,
// fences, cancels and lost-worker rules.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { jetstreamManager } from "@nats-io/jetstream";
import type { NatsConnection } from "@nats-io/transport-node";
import {
  capabilitiesOf,
  capabilitiesToProto,
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  requestToProto,
  runGrpcWorker,
} from "@trellis/adapter-sdk";
import {
  ClaimRequestSchema,
  ClaimResponseSchema,
  WorkerReportSchema,
  WorkerService,
  WorkItemSchema,
} from "@trellis/contracts/adapters";
import type { RoutedExecutor } from "@trellis/execution";
import { capabilities, probeAdapter, routedEvents } from "@trellis/execution/testing";
import { textOf } from "@trellis/messages";
import { eventually, uniqueName } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import {
  executionRequest,
  knownWorkers,
  safeTurnRunsAgainElsewhere,
  useBridgedSessions,
} from "./support/worker-sessions.js";

describe("gRPC workers in a mesh: direct placement", () => {
  const prefix = uniqueName("gwm").toLowerCase();
  const mesh = useBridgedSessions(prefix, {
    env: { TRELLIS_ADAPTERS_GRACE: "500ms" },
    claimTimeoutMs: 500,
  });
  const { workers, processes } = mesh;

  /**
   * A probe gRPC worker of `backendId` on the service (heartbeat 200 ms),
   * stopped after the test; resolves once the router knows `known` workers
   * of that backend.
   */
  async function probeWorker(backendId: string, known = 1): Promise<void> {
    workers.push(
      await runGrpcWorker({
        adapter: probeAdapter({ backendId }),
        url: mesh.url,
        heartbeatMs: 200,
      }),
    );
    await knownWorkers(mesh.routed, backendId, known);
  }

  it("runs a turn on the session directly: routed, progress, one result, no work queue", async () => {
    await probeWorker("gd1");
    expect(mesh.routed.registry.backend("gd1")?.workers[0]?.direct).toBe(true);
    // Progress messages sent to the router on their own (not riding on the result).
    const remote = mesh.routed.remote as NonNullable<typeof mesh.routed.remote>;
    let progressMessages = 0;
    const progress = (mesh.routed.connection as NatsConnection).subscribe(
      `${remote.names.routerInbox(remote.routerId)}.event`,
      {
        callback: () => {
          progressMessages++;
        },
      },
    );
    for (const text of ["hello", "again"]) {
      const r = executionRequest("gd1", text);
      const result = await mesh.routed.router.execute(r.value);
      expect(result.status, JSON.stringify(result)).toBe("completed");
      expect(result.messages[0] && textOf(result.messages[0])).toBe(`gd1 says: ${text}`);
      expect(r.events[0]).toMatchObject({ kind: "routed", backendId: "gd1", attempt: 1 });
      // The trailing progress came with the result, in order, before it.
      expect(r.events.map((e) => e.kind)).toEqual([
        "routed",
        "text_delta",
        "step_finished",
        "turn_finished",
      ]);
    }
    progress.unsubscribe();
    expect(progressMessages).toBe(0);
    // Nothing went through JetStream: the work-queue stream was never created.
    const jsm = await jetstreamManager(mesh.routed.connection as NatsConnection);
    await expect(jsm.streams.info(mesh.routed.remote?.names.stream as string)).rejects.toThrow(
      /stream not found/,
    );
  });

  it("a slow turn's progress reaches the caller while it runs, batched, in order", async () => {
    const seen: string[] = [];
    workers.push(
      await runGrpcWorker({
        adapter: defineAdapter({
          backendId: "gd6",
          capabilities: capabilities(),
          async run(request) {
            request.onEvent?.({ kind: "text_delta", text: "one" });
            request.onEvent?.({ kind: "text_delta", text: "two" });
            // Seen by the caller before the turn ends (one ReportWorkEvents, one NATS message).
            await eventually(() => seen.includes("two"), { timeoutMs: 10_000, what: "two" });
            request.onEvent?.({ kind: "text_delta", text: "three" });
            return { status: "completed", messages: [] };
          },
        }),
        url: mesh.url,
        heartbeatMs: 200,
      }),
    );
    await knownWorkers(mesh.routed, "gd6", 1);
    const r = executionRequest("gd6", "x");
    const result = await mesh.routed.router.execute({
      ...r.value,
      onEvent: (event) => {
        r.events.push(event);
        if (event.kind === "text_delta") seen.push(event.text);
      },
    });
    expect(result.status, JSON.stringify(result)).toBe("completed");
    expect(seen).toEqual(["one", "two", "three"]);
    expect(r.events.map((e) => e.kind).at(-1)).toBe("turn_finished");
  });

  it("a claim whose router is gone or silent is refused, and a silent one is given back", async () => {
    const nc = mesh.routed.connection as NatsConnection;
    const names = mesh.routed.remote?.names as NonNullable<RoutedExecutor["remote"]>["names"];
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: mesh.url }));
    const capabilities = capabilitiesToProto(capabilitiesOf(probeAdapter({ backendId: "gd7" })));
    const abort = new AbortController();
    const stream = client
      .connectWorker(
        {
          worker: {
            schemaVersion: EXECUTION_SCHEMA_VERSION,
            workerId: "gd7-raw",
            backendId: "gd7",
            capabilities,
            capacity: 2,
            heartbeatIntervalMs: 1000,
          },
        },
        { signal: abort.signal },
      )
      [Symbol.asyncIterator]();
    const next = async () => {
      const r = await stream.next();
      if (r.done) throw new Error("the command stream ended");
      return r.value.command;
    };
    try {
      const connected = await next();
      const session = connected.case === "connected" ? connected.value.session : "";
      // A router that listens but never answers (and one that is not there at all).
      const silent = `${prefix}.test.silent-router`;
      const released: string[] = [];
      const listener = nc.subscribe(`${silent}.*`, {
        callback: (_err, msg) => {
          if (!msg.subject.endsWith(".event")) return;
          const report = fromBinary(WorkerReportSchema, msg.data);
          if (report.body.case === "released") released.push(report.executionId);
        },
      });
      const offer = (executionId: string, replyTo: string) =>
        nc.publish(
          names.offer("gd7-raw"),
          toBinary(
            WorkItemSchema,
            create(WorkItemSchema, {
              executionId,
              attempt: 1,
              replyTo,
              request: requestToProto(executionRequest("gd7", "hi").value),
            }),
          ),
        );
      const claim = async (executionId: string) => {
        const command = await next();
        expect(command.case).toBe("offer");
        expect(command.case === "offer" ? command.value.executionId : "").toBe(executionId);
        return client.claimWork({
          work: { workerId: "gd7-raw", session, executionId, attempt: 1 },
          negotiation: { supported: true, effectiveCapabilities: capabilities },
        });
      };
      offer("exe_gd7_gone", `${prefix}.test.no-router`);
      expect(await claim("exe_gd7_gone")).toMatchObject({
        granted: false,
        reason: "the router that placed the execution is gone",
      });
      offer("exe_gd7_silent", silent);
      // The bridge waits routerTimeoutMs (2 s by default) for the answer.
      expect(await claim("exe_gd7_silent")).toMatchObject({
        granted: false,
        reason: "the router did not answer the claim in time",
      });
      // It may have been granted after the bridge stopped waiting: given back.
      await eventually(() => released.includes("exe_gd7_silent"), { what: "the give-back" });
      listener.unsubscribe();
    } finally {
      abort.abort();
    }
  });

  it("grants only the worker it offered the attempt to; a stale claim never runs", async () => {
    await probeWorker("gd2");
    const nc = mesh.routed.connection as NatsConnection;
    const names = mesh.routed.remote?.names as NonNullable<RoutedExecutor["remote"]>["names"];
    const [worker] = mesh.routed.registry.backend("gd2")?.workers ?? [];
    // See the item the router offers (a second subscriber of the offer subject).
    const spy = nc.subscribe(names.offer(worker?.workerId as string), { max: 1 });
    const r = executionRequest("gd2", "sleep 1000");
    const running = mesh.routed.router.execute(r.value);
    let item: ReturnType<typeof fromBinary<typeof WorkItemSchema>> | undefined;
    for await (const msg of spy) item = fromBinary(WorkItemSchema, msg.data);
    expect(item?.attempt).toBe(1);
    const claim = async (workerId: string, attempt: number) =>
      fromBinary(
        ClaimResponseSchema,
        (
          await nc.request(
            `${item?.replyTo}.claim`,
            toBinary(
              ClaimRequestSchema,
              create(ClaimRequestSchema, {
                executionId: item?.executionId as string,
                attempt,
                workerId,
                negotiation: { supported: true },
              }),
            ),
          )
        ).data,
      );
    // Another worker (say, one pulling a stale queue copy) is refused…
    expect(await claim("someone-else", 1)).toMatchObject({ granted: false });
    // …and an "unclaimed" give-back under the same worker id (a second
    // session of that id that never claimed) does not undo the running claim.
    await eventually(() => routedEvents(r.events).length === 1, { what: "the claim" });
    nc.publish(
      `${item?.replyTo}.event`,
      toBinary(
        WorkerReportSchema,
        create(WorkerReportSchema, {
          executionId: item?.executionId as string,
          attempt: 1,
          workerId: worker?.workerId as string,
          body: { case: "released", value: { reason: "not taken", unclaimed: true } },
        }),
      ),
    );
    const result = await running;
    expect(result.status, JSON.stringify(result)).toBe("completed");
    // …and so is any claim once the worker it was offered to ran it.
    expect(await claim(worker?.workerId as string, 1)).toMatchObject({ granted: false });
    expect(routedEvents(r.events).map((e) => e.workerId)).toEqual([worker?.workerId]);
  });

  it("an offer its worker does not claim is given back and placed on another worker", async () => {
    // A session that never claims: a bare WorkerService client that only connects.
    const client = createClient(WorkerService, createGrpcTransport({ baseUrl: mesh.url }));
    const closing = new AbortController();
    const stream = client
      .connectWorker(
        {
          worker: {
            schemaVersion: EXECUTION_SCHEMA_VERSION,
            workerId: `mute-${prefix}`,
            backendId: "gd3",
            capabilities: capabilitiesToProto(capabilitiesOf(probeAdapter({ backendId: "gd3" }))),
            capacity: 1,
            heartbeatIntervalMs: 60_000,
          },
        },
        { signal: closing.signal },
      )
      [Symbol.asyncIterator]();
    try {
      const first = await stream.next();
      expect(first.value?.command.case).toBe("connected");
      await knownWorkers(mesh.routed, "gd3", 1);
      const r = executionRequest("gd3", "hi");
      const running = mesh.routed.router.execute(r.value);
      const offered = await stream.next();
      expect(offered.value?.command.case).toBe("offer");
      await probeWorker("gd3", 2);
      const result = await running;
      expect(result.status, JSON.stringify(result)).toBe("completed");
      const placed = routedEvents(r.events);
      expect(placed).toHaveLength(1);
      expect(placed[0]?.workerId).not.toBe(`mute-${prefix}`);
      expect(placed[0]?.attempt).toBe(1);
    } finally {
      closing.abort();
    }
  });

  it("a caller's cancel reaches the worker, which ends the run", async () => {
    await probeWorker("gd4");
    const r = executionRequest("gd4", "sleep 30000");
    const running = mesh.routed.router.execute(r.value);
    await eventually(() => routedEvents(r.events).length === 1, { what: "the claim" });
    r.abort.abort();
    const result = await running;
    expect(result.status).toBe("cancelled");
    // The worker's slot is free again: the next turn runs there.
    const next = await mesh.routed.router.execute(executionRequest("gd4", "after").value);
    expect(next.status, JSON.stringify(next)).toBe("completed");
  });

  it("after kill -9 mid-turn: safe to retry runs again elsewhere, else worker_lost", async () => {
    const survivor = await safeTurnRunsAgainElsewhere(mesh.routed, {
      url: mesh.url,
      backend: "gd5",
      idSuffix: prefix,
      processes,
    });
    await knownWorkers(mesh.routed, "gd5", 1);
    const fragile = executionRequest("gd5", "sleep 30000");
    const lost = mesh.routed.router.execute(fragile.value);
    await eventually(() => routedEvents(fragile.events).length === 1, { what: "the claim" });
    await survivor.kill();
    expect(await lost).toMatchObject({ status: "failed", category: "worker_lost" });
  }, 90_000);
});
