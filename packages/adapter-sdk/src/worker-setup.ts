/**
 * What every worker (over NATS or gRPC) checks and settles before it
 * connects, the executions it runs, and the handle it returns.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import { createLogger, type Logger } from "@trellis/runtime";
import { BACKEND_ID_PATTERN } from "./define-adapter.js";
import { capabilitiesToProto } from "./mapping/negotiation.js";
import { capabilitiesOf, capabilityProblems } from "./negotiation.js";
import {
  EXECUTION_SCHEMA_VERSION,
  type ExecutionAdapter,
  type ExecutionCapabilities,
} from "./types.js";
import { toToken } from "./wire.js";

/** The options both worker kinds share. */
export interface WorkerBasics {
  adapter: ExecutionAdapter;
  workerId?: string | undefined;
  capacity?: number | undefined;
  heartbeatMs?: number | undefined;
  graceMs?: number | undefined;
  logger?: Logger | undefined;
}

/** A worker's checked identity and settings, defaults applied. */
export interface WorkerSetup {
  backendId: string;
  capabilities: ExecutionCapabilities;
  /** Executions at once: a whole number, at least 1 (default 1). */
  capacity: number;
  heartbeatMs: number;
  graceMs: number;
  /** The given id, or backend, host, pid and a random part. */
  workerId: string;
  /** The worker's logger, tagged with its id. */
  log: Logger;
}

/**
 * Checks the adapter (its backend id and the capabilities it describes;
 * throws naming what is wrong) and applies the defaults of the settings.
 */
export function workerSetup(options: WorkerBasics): WorkerSetup {
  const { adapter } = options;
  const backendId = adapter.backendId;
  if (!BACKEND_ID_PATTERN.test(backendId)) {
    throw new Error(`backend id ${JSON.stringify(backendId)} must match ${BACKEND_ID_PATTERN}`);
  }
  const capabilities = capabilitiesOf(adapter);
  const problems = capabilityProblems(capabilities);
  if (problems.length) {
    throw new Error(
      `adapter ${backendId} describes invalid capabilities: ${problems.map((p) => `${p.field} ${p.message}`).join("; ")}`,
    );
  }
  const workerId =
    options.workerId ??
    toToken(`${backendId}-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`);
  return {
    backendId,
    capabilities,
    capacity: Math.max(1, Math.floor(options.capacity ?? 1)),
    heartbeatMs: options.heartbeatMs ?? 1000,
    graceMs: options.graceMs ?? 2000,
    workerId,
    log: (options.logger ?? createLogger({ service: `adapter-${backendId}` })).child({
      worker_id: workerId,
    }),
  };
}

/** Routing hints a worker gives: relative cost per execution, typical latency. */
export interface WorkerHints {
  costPerExecution?: number;
  latencyMs?: number;
}

/**
 * How a worker describes itself to the routers: the fields of its
 * registration both kinds send alike (the NATS worker adds its load and
 * whether it is leaving).
 */
export function workerAnnouncement(setup: WorkerSetup, hints: WorkerHints | undefined) {
  return {
    schemaVersion: EXECUTION_SCHEMA_VERSION,
    workerId: setup.workerId,
    backendId: setup.backendId,
    capabilities: capabilitiesToProto(setup.capabilities),
    capacity: setup.capacity,
    hints: {
      costPerExecution: hints?.costPerExecution ?? 0,
      latencyMs: hints?.latencyMs ?? 0,
    },
    heartbeatIntervalMs: setup.heartbeatMs,
  };
}

/** An execution a worker runs now. */
export interface RunningExecution {
  abort: AbortController;
  done: Promise<void>;
}

/**
 * Waits until the running executions have finished; those still running
 * after `graceMs` are aborted ("the worker is stopping") and waited for too.
 * With `ignoreFailures` an execution that rejects does not fail the wait.
 */
export async function drainExecutions(
  running: ReadonlyMap<string, RunningExecution>,
  graceMs: number,
  options: { ignoreFailures?: boolean } = {},
): Promise<void> {
  const all = Promise.all(
    [...running.values()].map((r) =>
      options.ignoreFailures ? r.done.catch(() => undefined) : r.done,
    ),
  );
  const timer = setTimeout(() => {
    for (const r of running.values()) r.abort.abort(new Error("the worker is stopping"));
  }, graceMs);
  await all;
  clearTimeout(timer);
}

/** A running worker. */
export interface AdapterWorker {
  readonly workerId: string;
  readonly backendId: string;
  /** Executions running now. */
  readonly inFlight: number;
  /** Executions this worker has finished (any outcome). */
  readonly completed: number;
  /** Stop taking work, let running executions finish (up to `graceMs`), leave. */
  stop(options?: { graceMs?: number }): Promise<void>;
}

/** The executions a worker runs now, and how many it has finished. */
export class RunningExecutions {
  readonly #running = new Map<string, RunningExecution>();
  #completed = 0;

  /** Executions running now. */
  get size(): number {
    return this.#running.size;
  }

  /** Executions finished (any outcome). */
  get completed(): number {
    return this.#completed;
  }

  /** Hold the execution as running until it is done, then count it finished. */
  async track(executionId: string, execution: RunningExecution): Promise<void> {
    this.#running.set(executionId, execution);
    try {
      await execution.done;
    } finally {
      this.#running.delete(executionId);
      this.#completed++;
    }
  }

  /** Abort a running execution (the router canceled it); one not running here is ignored. */
  cancel(executionId: string, reason: string): void {
    this.#running.get(executionId)?.abort.abort(new Error(reason));
  }

  /** {@link drainExecutions} of those running now. */
  drain(graceMs: number, options: { ignoreFailures?: boolean } = {}): Promise<void> {
    return drainExecutions(this.#running, graceMs, options);
  }

  /** The worker's handle: its ids, its counts read from these executions, and `stop`. */
  handle(ids: { workerId: string; backendId: string }, stop: AdapterWorker["stop"]): AdapterWorker {
    const running = this;
    return {
      workerId: ids.workerId,
      backendId: ids.backendId,
      get inFlight() {
        return running.size;
      },
      get completed() {
        return running.completed;
      },
      stop,
    };
  }
}
