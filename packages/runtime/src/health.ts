/**
 * gRPC health checking (grpc.health.v1) fed by dependency probes.
 *
 * The overall status ("") and every served service start SERVING; while any
 * registered dependency probe fails (or before it first succeeds), all of them
 * report NOT_SERVING; during shutdown they report NOT_SERVING for good.
 * Kubernetes probes this with its native gRPC probe.
 */
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { health } from "@trellis/contracts/grpc";
import { IdleBackoff } from "./idle-backoff.js";
import type { Logger } from "./logger.js";

const { Health, HealthCheckResponseSchema, HealthCheckResponse_ServingStatus: Status } = health;
type Status = health.HealthCheckResponse_ServingStatus;

/**
 * Something a service cannot work without (Postgres, NATS). `check` resolves
 * when the dependency is usable and throws/rejects when it is not.
 *
 * @example
 *   { name: "postgres", check: () => sql`select 1`.execute(db) }
 */
export interface HealthDependency {
  /** Short name, used in logs ("postgres"). */
  name: string;
  /** Resolve when usable; reject otherwise. Should honour `signal` (aborted on timeout). */
  check: (signal: AbortSignal) => Promise<unknown> | unknown;
  /** Probe timeout; defaults to {@link HealthOptions.probeTimeoutMs}. */
  timeoutMs?: number;
}

/** Options of the health service. */
export interface HealthOptions {
  dependencies?: readonly HealthDependency[];
  /** How often dependencies are probed (default 2000 ms). */
  pollIntervalMs?: number;
  /**
   * While every dependency stays healthy and nobody asks (Check, List,
   * Watch), the interval doubles per probe up to this (default 8 × the poll
   * interval); a failed or changed probe, or a health request, brings it
   * back to `pollIntervalMs` at once.
   */
  idlePollMaxMs?: number;
  /** How long one probe may take before it counts as failed (default: the poll interval, at most 5 s). */
  probeTimeoutMs?: number;
}

/** A service's serving status as the health protocol reports it. */
export type ServingStatus = "SERVING" | "NOT_SERVING";

/** The state of one dependency after its latest probe. */
export interface DependencyStatus {
  readonly name: string;
  /** `undefined` until the first probe finishes. */
  readonly healthy: boolean | undefined;
  /** Why the latest probe failed. */
  readonly error: string | undefined;
}

/** Read and steer the health a server reports. */
export interface HealthReporter {
  /** The status reported for `service` ("" = the whole server); undefined if unknown. */
  status(service?: string): ServingStatus | undefined;
  /**
   * Set the base status of a service (registering it if new). Dependencies and
   * shutdown still force NOT_SERVING on top of it.
   */
  setStatus(service: string, status: ServingStatus): void;
  /** Latest probe results. */
  dependencies(): readonly DependencyStatus[];
  /** Probe every dependency now; resolves when the round is done. */
  probe(): Promise<void>;
}

interface DependencyState {
  readonly dependency: HealthDependency;
  healthy: boolean | undefined;
  error: string | undefined;
}

/** Health state of one server: statuses, probe loop, watchers. @internal */
export class HealthMonitor implements HealthReporter {
  readonly #base = new Map<string, ServingStatus>([["", "SERVING"]]);
  readonly #deps: DependencyState[];
  readonly #pollIntervalMs: number;
  readonly #probeTimeoutMs: number;
  readonly #logger: Logger;
  readonly #backoff: IdleBackoff;
  #polling: AbortController | undefined;
  #round: Promise<void> | undefined;
  #shuttingDown = false;
  // Watch calls waiting for the next change: each is woken and dropped on a
  // change, or dropped when its call's signal aborts. Not one long-lived
  // promise raced against each call's signal: every call that ended while
  // waiting left a reaction on that promise until the next change, which a
  // healthy server may never have.
  readonly #waiters = new Set<() => void>();

  constructor(options: HealthOptions, logger: Logger) {
    this.#deps = (options.dependencies ?? []).map((dependency) => ({
      dependency,
      healthy: undefined,
      error: undefined,
    }));
    this.#pollIntervalMs = options.pollIntervalMs ?? 2000;
    this.#probeTimeoutMs = options.probeTimeoutMs ?? Math.min(this.#pollIntervalMs, 5000);
    this.#backoff = new IdleBackoff({
      baseMs: this.#pollIntervalMs,
      maxMs: Math.max(this.#pollIntervalMs, options.idlePollMaxMs ?? this.#pollIntervalMs * 8),
      // Probing must not keep a process alive on its own.
      unref: true,
    });
    this.#logger = logger;
  }

  /** Register served services (SERVING unless set otherwise). */
  register(services: Iterable<string>): void {
    for (const name of services) if (!this.#base.has(name)) this.#base.set(name, "SERVING");
    this.#notify();
  }

  status(service = ""): ServingStatus | undefined {
    const base = this.#base.get(service);
    if (base === undefined) return undefined;
    if (this.#shuttingDown) return "NOT_SERVING";
    for (const dep of this.#deps) if (dep.healthy !== true) return "NOT_SERVING";
    return base;
  }

  setStatus(service: string, status: ServingStatus): void {
    if (this.#base.get(service) === status) return;
    this.#base.set(service, status);
    this.#notify();
  }

  dependencies(): readonly DependencyStatus[] {
    return this.#deps.map(({ dependency, healthy, error }) => ({
      name: dependency.name,
      healthy,
      error,
    }));
  }

  /** Every known service with its status ("" included). */
  statuses(): Map<string, ServingStatus> {
    const out = new Map<string, ServingStatus>();
    for (const name of this.#base.keys()) out.set(name, this.status(name)!);
    return out;
  }

  /** Start polling; resolves after the first probe round, so a listening server reports the truth. */
  async start(): Promise<void> {
    if (this.#polling !== undefined || this.#shuttingDown) return;
    if (this.#deps.length > 0) {
      this.#polling = new AbortController();
      void this.#pollLoop(this.#polling.signal);
    }
    await this.probe();
  }

  /** Probe every interval; back off while all is well and nobody asks. */
  async #pollLoop(stop: AbortSignal): Promise<void> {
    while (!stop.aborted) {
      await this.#backoff.wait(stop);
      if (stop.aborted) return;
      const before = this.#deps.map((d) => d.healthy);
      await this.probe();
      const steady = this.#deps.every((d, i) => d.healthy === true && before[i] === true);
      if (steady) this.#backoff.idle();
      else this.#backoff.reset();
    }
  }

  /** Someone asks for the health: probe at the base interval again. */
  asked(): void {
    this.#backoff.reset();
  }

  /** Report NOT_SERVING for good, stop probing, and let Watch streams end. */
  shutdown(): void {
    if (this.#shuttingDown) return;
    this.#shuttingDown = true;
    this.#polling?.abort();
    this.#notify();
  }

  get shuttingDown(): boolean {
    return this.#shuttingDown;
  }

  probe(): Promise<void> {
    // Never overlap rounds: a slow dependency must not pile up probes.
    this.#round ??= Promise.all(this.#deps.map((d) => this.#probeOne(d))).then(() => {
      this.#round = undefined;
    });
    return this.#round;
  }

  async #probeOne(state: DependencyState): Promise<void> {
    const timeoutMs = state.dependency.timeoutMs ?? this.#probeTimeoutMs;
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new Error(`probe timed out after ${timeoutMs} ms`)),
      timeoutMs,
    );
    let error: unknown;
    try {
      // Race the abort too: a probe that ignores its signal must still time out.
      await Promise.race([
        Promise.resolve().then(() => state.dependency.check(controller.signal)),
        new Promise<never>((_, reject) => {
          controller.signal.addEventListener("abort", () => reject(controller.signal.reason), {
            once: true,
          });
        }),
      ]);
    } catch (e) {
      error = e;
    } finally {
      clearTimeout(timer);
      controller.abort();
    }
    if (this.#shuttingDown) return;
    const healthy = error === undefined;
    const message = healthy ? undefined : error instanceof Error ? error.message : String(error);
    const was = state.healthy;
    state.healthy = healthy;
    state.error = message;
    if (was === healthy) return;
    // Log transitions only: a dependency that stays down is one line, not one per poll.
    const name = state.dependency.name;
    if (!healthy) this.#logger.warn("dependency unhealthy", { dependency: name, error });
    else if (was === false) this.#logger.info("dependency healthy again", { dependency: name });
    this.#notify();
  }

  #notify(): void {
    // Each wake-up removes itself; a waiter added meanwhile waits for the next change.
    for (const wake of [...this.#waiters]) wake();
  }

  /** Resolves at the next change, or when `signal` aborts; holds nothing of the call after. */
  nextChange(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const wake = (): void => {
        this.#waiters.delete(wake);
        signal.removeEventListener("abort", wake);
        resolve();
      };
      this.#waiters.add(wake);
      signal.addEventListener("abort", wake, { once: true });
    });
  }

  /** How many calls wait in {@link nextChange} now (for tests). */
  get waiting(): number {
    return this.#waiters.size;
  }
}

const wire: Record<ServingStatus, Status> = {
  SERVING: Status.SERVING,
  NOT_SERVING: Status.NOT_SERVING,
};

/** The grpc.health.v1.Health implementation over a {@link HealthMonitor}. @internal */
export function createHealthImpl(monitor: HealthMonitor): ServiceImpl<typeof Health> {
  return {
    check(req) {
      monitor.asked();
      const status = monitor.status(req.service);
      // grpc health spec: Check of an unknown service fails with NOT_FOUND.
      if (status === undefined) {
        throw new ConnectError(`unknown service ${JSON.stringify(req.service)}`, Code.NotFound);
      }
      return { status: wire[status] };
    },
    list() {
      monitor.asked();
      const statuses: Record<string, health.HealthCheckResponse> = {};
      for (const [name, status] of monitor.statuses()) {
        statuses[name] = create(HealthCheckResponseSchema, { status: wire[status] });
      }
      return { statuses };
    },
    async *watch(req, ctx: HandlerContext) {
      // grpc health spec: send the current status at once, then every change;
      // an unknown service is SERVICE_UNKNOWN and the stream stays open.
      monitor.asked();
      let last: Status | undefined;
      for (;;) {
        const status = monitor.status(req.service);
        const now = status === undefined ? Status.SERVICE_UNKNOWN : wire[status];
        if (now !== last) {
          last = now;
          yield { status: now };
        }
        // After the final NOT_SERVING, end the stream so it does not hold up draining.
        if (monitor.shuttingDown || ctx.signal.aborted) return;
        await monitor.nextChange(ctx.signal);
      }
    },
  };
}
