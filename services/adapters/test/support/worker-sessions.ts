/**
 * Set-up shared by the gRPC worker tests: WorkerService served over h2c as
 * the adapters service serves it (alone, or with a router and the sessions
 * bridged onto its NATS: `useBridgedSessions`), a port that keeps the
 * sessions it is given, and execution requests whose events the test reads.
 */
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import type { ServiceImpl } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import type { AdapterWorker, ExecutionEvent, ExecutionRequest } from "@trellis/adapter-sdk";
import { WorkerService } from "@trellis/contracts/adapters";
import {
  createWorkerHandlers,
  NatsWorkerBridge,
  type RoutedExecutor,
  routedNats,
  type WorkerPort,
  type WorkerSession,
  WorkerSessions,
} from "@trellis/execution";
import { routedEvents, startDistributedRouter, userTurn } from "@trellis/execution/testing";
import { deleteTestStreams, eventually, testNatsUrl } from "@trellis/testkit";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { withErrorDetails } from "../../src/handlers/errors.js";
import { probeGrpcWorkerScript, startWorkerProcess, type WorkerProcess } from "./processes.js";

/** WorkerService with `handlers` on 127.0.0.1 (a free port), with the service's error details. */
export async function serveWorkerService(
  handlers: ServiceImpl<typeof WorkerService>,
): Promise<{ server: http2.Http2Server; url: string }> {
  const server = http2.createServer(
    connectNodeAdapter({
      routes: (r) => {
        r.service(WorkerService, withErrorDetails(WorkerService, handlers));
      },
    }),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** Options of {@link useBridgedSessions}. */
export interface BridgedSessionsOptions {
  /** More settings of the router (TRELLIS_ADAPTERS_GRACE, …). */
  env?: Record<string, string>;
  /** The bridge exchanges the router's messages with it in process (its `local`). */
  local?: boolean;
  /** The bridge's `claimTimeoutMs`. */
  claimTimeoutMs: number;
}

/** What {@link useBridgedSessions} started, and what its tests started. */
export interface BridgedSessions {
  /** The router (before the file's tests: throws). */
  readonly routed: RoutedExecutor;
  /** The WorkerService's URL (before the file's tests: throws). */
  readonly url: string;
  /** Workers a test started: stopped after it. */
  readonly workers: AdapterWorker[];
  /** Processes a test started: killed after it. */
  readonly processes: WorkerProcess[];
}

/**
 * The set-up of a gRPC worker test file: before its tests, a distributed
 * router under `prefix` and the WorkerService of sessions bridged onto that
 * router's NATS, as the adapters service runs them; after each test, the
 * workers and processes it left are stopped; after the file, all is closed
 * and the streams deleted.
 */
export function useBridgedSessions(
  prefix: string,
  options: BridgedSessionsOptions,
): BridgedSessions {
  let started:
    | { routed: RoutedExecutor; sessions: WorkerSessions; server: http2.Http2Server; url: string }
    | undefined;
  const current = () => {
    if (started === undefined) throw new Error("the sessions start in beforeAll");
    return started;
  };
  const workers: AdapterWorker[] = [];
  const processes: WorkerProcess[] = [];
  beforeAll(async () => {
    const routed = await startDistributedRouter(testNatsUrl, prefix, options.env);
    const sessions = new WorkerSessions({
      port: new NatsWorkerBridge({
        nats: () => routedNats(routed),
        ...(options.local ? { local: () => routed.remote } : {}),
        claimTimeoutMs: options.claimTimeoutMs,
      }),
    });
    started = { routed, sessions, ...(await serveWorkerService(createWorkerHandlers(sessions))) };
  });
  afterEach(async () => {
    for (const w of workers.splice(0)) await w.stop({ graceMs: 100 });
    for (const p of processes.splice(0)) await p.kill();
  });
  afterAll(async () => {
    started?.sessions.close();
    started?.server.close();
    await started?.routed.stop();
    await deleteTestStreams(prefix);
  });
  return {
    get routed() {
      return current().routed;
    },
    get url() {
      return current().url;
    },
    workers,
    processes,
  };
}

/** `port`, with each session it is given also kept in `kept` by worker id (to forge a call with it, or cut it). */
export function keepingSessions(port: WorkerPort, kept: Map<string, WorkerSession>): WorkerPort {
  return {
    attach: (session) => {
      port.attach(session);
      kept.set(session.workerId, session);
    },
    beat: (session) => port.beat(session),
    detach: (session, how) => port.detach(session, how),
    claim: (session, work, negotiation) => port.claim(session, work, negotiation),
    events: (session, work, events) => port.events(session, work, events),
    complete: (session, work, result, trailing) => port.complete(session, work, result, trailing),
    secrets: (session, work) => port.secrets(session, work),
  };
}

/** A user turn for `backend`; its events are collected, and it has an abort of its own. */
export function executionRequest(
  backend: string,
  text: string,
  over: Partial<ExecutionRequest> = {},
) {
  const events: ExecutionEvent[] = [];
  const abort = new AbortController();
  const value = userTurn(backend, text, {
    taskId: `tsk_${Math.random().toString(36).slice(2)}`,
    workspaceId: "wsp_1",
    signal: abort.signal,
    onEvent: (event) => events.push(event),
    ...over,
  });
  return { value, events, abort };
}

/** Resolves once `router` knows `count` workers of `backend` (30 s at the most). */
export const knownWorkers = (router: RoutedExecutor, backend: string, count: number) =>
  eventually(() => router.registry.backend(backend)?.workers.length === count, {
    timeoutMs: 30_000,
    what: `${count} worker(s) of ${backend}`,
  });

/**
 * Two probe gRPC worker processes of `backend` on the WorkerService at `url`
 * (ids end in `idSuffix`; each is pushed to `processes` for the test to
 * stop); a safe-to-retry turn claimed by one is run again on the other after
 * kill -9 of the first, exactly once to the end. The worker left alive.
 */
export async function safeTurnRunsAgainElsewhere(
  router: RoutedExecutor,
  options: { url: string; backend: string; idSuffix: string; processes: WorkerProcess[] },
): Promise<WorkerProcess> {
  const { url, backend, idSuffix, processes } = options;
  const start = (name: string) =>
    startWorkerProcess(probeGrpcWorkerScript, {
      PROBE_BACKEND: backend,
      TRELLIS_WORKER_URL: url,
      TRELLIS_WORKER_ID: `${name}-${idSuffix}`,
    }).then((p) => {
      processes.push(p);
      return p;
    });
  const [a, b] = await Promise.all([start("a"), start("b")]);
  await knownWorkers(router, backend, 2);
  const byId = new Map([
    [a.workerId, a],
    [b.workerId, b],
  ]);

  const safe = executionRequest(backend, "sleep 1500", {
    agent: { id: "agt_1", backend, definition: {}, tools: [], safeToRetry: true },
  });
  const retried = router.router.execute(safe.value);
  await eventually(() => routedEvents(safe.events).length === 1, { what: "the first claim" });
  const victim = byId.get(routedEvents(safe.events)[0]?.workerId as string) as WorkerProcess;
  await victim.kill();
  const result = await retried;
  expect(result.status, JSON.stringify(result)).toBe("completed");
  const placements = routedEvents(safe.events);
  expect(placements.map((p) => p.attempt)).toEqual([1, 2]);
  expect(placements[1]?.workerId).not.toBe(victim.workerId);
  expect(safe.events.filter((e) => e.kind === "turn_finished")).toHaveLength(1);
  return victim === a ? b : a;
}
