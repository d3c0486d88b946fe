/**
 * The backends a router can place work on: in-process adapters (embedded
 * mode, the deterministic scripted backend everywhere) and remote workers,
 * known from their heartbeats. A worker that misses its heartbeats for
 * {@link BackendRegistry.ttlMultiplier} intervals is dropped and reported
 * lost; one that announces it is leaving gets no new work at once.
 */
import {
  BACKEND_ID_PATTERN,
  capabilitiesOf,
  capabilityProblems,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  TOKEN_PATTERN,
  weakestCapabilities,
} from "@trellis/adapter-sdk";
import { TrellisError } from "@trellis/runtime";

/** Routing hints a backend declares. */
export interface BackendHints {
  /** Relative cost of one execution (0: unknown). */
  costPerExecution: number;
  /** Typical latency in ms (0: unknown). */
  latencyMs: number;
}

/** One worker's announcement (the TS form of proto `WorkerRegistration`). */
export interface WorkerAnnouncement {
  workerId: string;
  backendId: string;
  capabilities: ExecutionCapabilities;
  capacity: number;
  inFlight: number;
  hints: BackendHints;
  heartbeatMs: number;
  leaving: boolean;
  /**
   * Work is placed on it directly (`WireNames.offer`), not through the
   * backend's JetStream work queue: a gRPC worker session the adapters
   * service holds.
   */
  direct?: boolean;
}

/** A live worker as the registry keeps it. */
export interface WorkerEntry extends WorkerAnnouncement {
  /** When its last heartbeat arrived (epoch ms). */
  lastSeen: number;
  /** How long it lives without another heartbeat. */
  ttlMs: number;
}

/** A backend the router can place work on now. */
export interface BackendView {
  backendId: string;
  /** Runs in this process (no queue, no worker). */
  inProcess: boolean;
  /** The adapter, for an in-process backend. */
  adapter?: ExecutionAdapter;
  /** The weakest capabilities among its live workers. */
  capabilities: ExecutionCapabilities;
  hints: BackendHints;
  /** Live, non-leaving workers (empty for an in-process backend). */
  workers: WorkerEntry[];
  capacity: number;
  /** Executions running or queued on it, as far as this process knows. */
  inFlight: number;
}

/** Options of an in-process backend. */
export interface LocalBackendOptions {
  /** Executions it takes at once before it counts as fully loaded (default 64). */
  capacity?: number;
  hints?: Partial<BackendHints>;
}

/** Options of {@link BackendRegistry}. */
export interface BackendRegistryOptions {
  /** Missed heartbeats after which a worker is dropped (default 3). */
  ttlMultiplier?: number;
  /** Clock (tests). */
  now?: () => number;
}

/** A registration that cannot be accepted (Connect InvalidArgument). */
export function registrationInvalid(param: string, message: string): TrellisError {
  return new TrellisError({
    reason: "adapter_registration_invalid",
    message: `${param}: ${message}`,
    param,
    domain: "adapters.trellis.dev",
  });
}

/** Most concurrent executions one worker may announce. */
export const MAX_CAPACITY = 100_000;
/** Most remote workers one registry keeps (each costs memory and routing work). */
export const MAX_WORKERS = 10_000;

/** Check an announcement; throws {@link registrationInvalid} naming the field. */
export function validateAnnouncement(value: WorkerAnnouncement): void {
  if (!TOKEN_PATTERN.test(value.workerId)) {
    throw registrationInvalid("worker.worker_id", `must match ${TOKEN_PATTERN}`);
  }
  if (!BACKEND_ID_PATTERN.test(value.backendId)) {
    throw registrationInvalid("worker.backend_id", `must match ${BACKEND_ID_PATTERN}`);
  }
  const problems = capabilityProblems(value.capabilities);
  const [first] = problems;
  if (first) throw registrationInvalid(`worker.capabilities.${first.field}`, first.message);
  if (!Number.isInteger(value.capacity) || value.capacity < 1 || value.capacity > MAX_CAPACITY) {
    throw registrationInvalid("worker.capacity", `must be 1…${MAX_CAPACITY}`);
  }
  if (
    !Number.isInteger(value.heartbeatMs) ||
    value.heartbeatMs < 10 ||
    value.heartbeatMs > 600_000
  ) {
    throw registrationInvalid("worker.heartbeat_interval_ms", "must be 10…600000 ms");
  }
  if (
    !(value.hints.costPerExecution >= 0 && Number.isFinite(value.hints.costPerExecution)) ||
    !(value.hints.latencyMs >= 0 && Number.isFinite(value.hints.latencyMs))
  ) {
    throw registrationInvalid("worker.hints", "must be finite and not negative");
  }
}

interface LocalBackend {
  adapter: ExecutionAdapter;
  capabilities: ExecutionCapabilities;
  capacity: number;
  hints: BackendHints;
}

/** Live backends and workers. */
export class BackendRegistry {
  readonly ttlMultiplier: number;
  readonly #now: () => number;
  readonly #local = new Map<string, LocalBackend>();
  readonly #workers = new Map<string, WorkerEntry>();
  /** Executions this process has running or queued, per backend. */
  readonly #outstanding = new Map<string, number>();
  readonly #lost = new Set<(worker: WorkerEntry) => void>();

  constructor(options: BackendRegistryOptions = {}) {
    this.ttlMultiplier = options.ttlMultiplier ?? 3;
    this.#now = options.now ?? Date.now;
  }

  /** Add an in-process backend (never expires). */
  addLocal(adapter: ExecutionAdapter, options: LocalBackendOptions = {}): void {
    if (!BACKEND_ID_PATTERN.test(adapter.backendId)) {
      throw new Error(
        `backend id ${JSON.stringify(adapter.backendId)} must match ${BACKEND_ID_PATTERN}`,
      );
    }
    this.#local.set(adapter.backendId, {
      adapter,
      capabilities: capabilitiesOf(adapter),
      capacity: options.capacity ?? 64,
      hints: { costPerExecution: 0, latencyMs: 0, ...options.hints },
    });
  }

  /** The in-process adapter of `backendId`, if there is one. */
  localAdapter(backendId: string): ExecutionAdapter | undefined {
    return this.#local.get(backendId)?.adapter;
  }

  /**
   * Accept a worker's announcement (a registration or a heartbeat). A leaving
   * worker stays known until its TTL runs out (its running executions still
   * report) but gets no new work.
   */
  announce(value: WorkerAnnouncement): { ttlMs: number } {
    validateAnnouncement(value);
    if (this.#local.has(value.backendId)) {
      throw registrationInvalid(
        "worker.backend_id",
        `${value.backendId} is an in-process backend of this router`,
      );
    }
    if (!this.#workers.has(value.workerId) && this.#workers.size >= MAX_WORKERS) {
      throw new TrellisError({
        reason: "rate_limited",
        message: `this router already knows ${MAX_WORKERS} workers; deregister idle ones or split the mesh`,
        param: "worker.worker_id",
        domain: "adapters.trellis.dev",
      });
    }
    const ttlMs = value.heartbeatMs * this.ttlMultiplier;
    this.#workers.set(value.workerId, { ...value, lastSeen: this.#now(), ttlMs });
    return { ttlMs };
  }

  /** Refresh a known worker; undefined when it is not (or no longer) known. */
  heartbeat(workerId: string, inFlight: number): { ttlMs: number } | undefined {
    const entry = this.#workers.get(workerId);
    if (!entry || !this.#alive(entry)) return undefined;
    entry.lastSeen = this.#now();
    entry.inFlight = inFlight;
    return { ttlMs: entry.ttlMs };
  }

  /** A known, live worker. */
  worker(workerId: string): WorkerEntry | undefined {
    const entry = this.#workers.get(workerId);
    return entry && this.#alive(entry) ? entry : undefined;
  }

  /** Forget a worker now (it deregistered). Its running executions are lost. */
  remove(workerId: string): boolean {
    const entry = this.#workers.get(workerId);
    if (!entry) return false;
    this.#workers.delete(workerId);
    for (const listener of this.#lost) listener(entry);
    return true;
  }

  /** Call `listener` for every worker dropped from now on. */
  onWorkerLost(listener: (worker: WorkerEntry) => void): () => void {
    this.#lost.add(listener);
    return () => this.#lost.delete(listener);
  }

  /** Drop workers whose heartbeats stopped; returns them. */
  sweep(): WorkerEntry[] {
    const dropped: WorkerEntry[] = [];
    for (const [id, entry] of this.#workers) {
      if (this.#alive(entry)) continue;
      this.#workers.delete(id);
      dropped.push(entry);
    }
    for (const entry of dropped) for (const listener of this.#lost) listener(entry);
    return dropped;
  }

  /** Count an execution placed on `backendId` by this process (until `done`). */
  track(backendId: string): () => void {
    this.#outstanding.set(backendId, (this.#outstanding.get(backendId) ?? 0) + 1);
    let done = false;
    return () => {
      if (done) return;
      done = true;
      this.#outstanding.set(backendId, (this.#outstanding.get(backendId) ?? 1) - 1);
    };
  }

  /** One backend, when it can take work now. */
  backend(backendId: string): BackendView | undefined {
    const local = this.#local.get(backendId);
    if (local) {
      return {
        backendId,
        inProcess: true,
        adapter: local.adapter,
        capabilities: local.capabilities,
        hints: local.hints,
        workers: [],
        capacity: local.capacity,
        inFlight: this.#outstanding.get(backendId) ?? 0,
      };
    }
    const workers = [...this.#workers.values()].filter(
      (w) => w.backendId === backendId && !w.leaving && this.#alive(w),
    );
    if (workers.length === 0) return undefined;
    const reported = workers.reduce((sum, w) => sum + w.inFlight, 0);
    return {
      backendId,
      inProcess: false,
      capabilities: weakestCapabilities(workers.map((w) => w.capabilities)),
      hints: {
        costPerExecution: Math.max(...workers.map((w) => w.hints.costPerExecution)),
        latencyMs: Math.max(...workers.map((w) => w.hints.latencyMs)),
      },
      workers,
      capacity: workers.reduce((sum, w) => sum + w.capacity, 0),
      // Heartbeats lag; what this process placed itself is fresher.
      inFlight: Math.max(reported, this.#outstanding.get(backendId) ?? 0),
    };
  }

  /** Every backend that can take work now, by id. */
  backends(): BackendView[] {
    const ids = new Set([
      ...this.#local.keys(),
      ...[...this.#workers.values()].map((w) => w.backendId),
    ]);
    return [...ids]
      .sort()
      .map((id) => this.backend(id))
      .filter((b): b is BackendView => b !== undefined);
  }

  #alive(entry: WorkerEntry): boolean {
    return this.#now() - entry.lastSeen <= entry.ttlMs;
  }
}
