/**
 * `GET /v1/health`: what this gateway can see of the Trellis behind it, in one
 * public answer, so one URL is enough to check a whole mesh (`trellis health`).
 *
 * | mode        | `services`                                   | `workers`                        |
 * |-------------|----------------------------------------------|----------------------------------|
 * | embedded    | one row, `trellis (embedded)`: every service | the adapters registry's backends |
 * |             | runs in the process that answers             | (in-process ones marked so)      |
 * | distributed | the gateway, then each upstream service's    | the workers registered with the  |
 * |             | own `grpc.health.v1` answer (2 s timeout)    | adapters service (live = listed) |
 *
 * Minimal on purpose, since it needs no credentials: names, statuses,
 * latencies, worker ids and load; no addresses, no error text beyond a short
 * reason. Bounded: one probe at a time, its answer reused for a second.
 */
import { AdapterRegistryService } from "@trellis/contracts/adapters";
import { DEFAULT_PORTS, type Mode, type ServiceClients, serviceUrl } from "@trellis/platform";

/** One service as the gateway sees it. */
export interface ServiceHealth {
  name: string;
  /** `SERVING`, `NOT_SERVING`, `UNREACHABLE`, … */
  status: string;
  latency_ms: number | null;
  /** Why it is not SERVING, briefly. */
  reason?: string;
}

/** One adapter worker the registry knows. */
export interface WorkerHealth {
  worker_id: string;
  backend_id: string;
  /** Registered and heartbeating (the registry drops a worker that stops). */
  status: "SERVING";
  in_process: boolean;
  capacity: number;
  in_flight: number;
  last_seen: string | null;
}

/** The body of `GET /v1/health`. */
export interface MeshHealth {
  object: "health";
  mode: Mode;
  /** `SERVING` when every service is. */
  status: "SERVING" | "NOT_SERVING";
  services: ServiceHealth[];
  workers: WorkerHealth[];
  /** Why `workers` may be incomplete (the registry did not answer). */
  workers_reason?: string;
  checked_at: string;
}

/** What {@link MeshHealthProbe} needs from the gateway. */
export interface MeshHealthDeps {
  mode: Mode;
  clients: ServiceClients;
  env: Readonly<Record<string, string | undefined>>;
}

const probeTimeoutMs = 2000;
const reuseMs = 1000;

// The upstream services of a mesh: every default port but the gateway's and
// the built-in worker's (workers are read from the registry instead).
const upstreams = Object.keys(DEFAULT_PORTS).filter(
  (name) => name !== "gateway" && name !== "adapter-worker",
);

function short(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  const cause =
    error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${message}${cause}`.split("\n")[0]?.slice(0, 160) ?? "";
}

/** An upstream's own gRPC health answer (Connect protocol over HTTP/1.1). */
async function probe(name: string, baseUrl: string): Promise<ServiceHealth> {
  const started = performance.now();
  try {
    const response = await fetch(`${baseUrl.replace(/\/+$/, "")}/grpc.health.v1.Health/Check`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
      signal: AbortSignal.timeout(probeTimeoutMs),
    });
    const latency = Number((performance.now() - started).toFixed(1));
    const body = (await response.json().catch(() => ({}))) as { status?: unknown };
    const status = typeof body.status === "string" ? body.status : `HTTP_${response.status}`;
    return { name, status, latency_ms: latency };
  } catch (error) {
    return { name, status: "UNREACHABLE", latency_ms: null, reason: short(error) };
  }
}

/** Answers `GET /v1/health`, probing at most once a second. */
export class MeshHealthProbe {
  readonly #deps: MeshHealthDeps;
  #last: { at: number; value: Promise<MeshHealth> } | undefined;

  constructor(deps: MeshHealthDeps) {
    this.#deps = deps;
  }

  /** The current view (a probe at most {@link reuseMs} old). */
  check(): Promise<MeshHealth> {
    const now = Date.now();
    if (this.#last && now - this.#last.at < reuseMs) return this.#last.value;
    const value = this.#probe();
    this.#last = { at: now, value };
    return value;
  }

  async #probe(): Promise<MeshHealth> {
    const { mode, env } = this.#deps;
    const gateway: ServiceHealth = {
      // Answering this request is the gateway's own health.
      name: mode === "embedded" ? "trellis (embedded)" : "gateway",
      status: "SERVING",
      latency_ms: 0,
    };
    const [services, workers] = await Promise.all([
      mode === "embedded"
        ? Promise.resolve([gateway])
        : Promise.all(upstreams.map((name) => probe(name, serviceUrl(name, env)))).then((rows) => [
            gateway,
            ...rows,
          ]),
      this.#workers(),
    ]);
    return {
      object: "health",
      mode,
      status: services.every((s) => s.status === "SERVING") ? "SERVING" : "NOT_SERVING",
      services,
      workers: workers.rows,
      ...(workers.reason ? { workers_reason: workers.reason } : {}),
      checked_at: new Date().toISOString(),
    };
  }

  async #workers(): Promise<{ rows: WorkerHealth[]; reason?: string }> {
    try {
      const { backends } = await this.#deps.clients
        .get(AdapterRegistryService)
        .listBackends({}, { timeoutMs: probeTimeoutMs });
      const rows = backends.flatMap((backend): WorkerHealth[] => {
        // A backend inside the router's process has no worker of its own: one row for it.
        if (backend.workers.length === 0 && backend.inProcess) {
          return [
            {
              worker_id: `${backend.backendId} (in process)`,
              backend_id: backend.backendId,
              status: "SERVING",
              in_process: true,
              capacity: 0,
              in_flight: 0,
              last_seen: null,
            },
          ];
        }
        return backend.workers.map((worker) => ({
          worker_id: worker.workerId,
          backend_id: backend.backendId,
          status: "SERVING",
          in_process: backend.inProcess,
          capacity: worker.capacity,
          in_flight: worker.inFlight,
          last_seen: worker.lastSeen
            ? new Date(Number(worker.lastSeen.seconds) * 1000).toISOString()
            : null,
        }));
      });
      return { rows };
    } catch (error) {
      return { rows: [], reason: `the adapters registry did not answer (${short(error)})` };
    }
  }
}
