/**
 * `trellis health`: one table of everything a running Trellis is made of,
 * from its gateway's URL alone.
 *
 * For each `--url` (default: TRELLIS_URL, else the local gateway) it reads
 * `GET /v1/health` — the gateway's view of its upstream services and the
 * adapter workers registered with them — and checks the gateway's own gRPC
 * health. A URL that is not a gateway (a single service) gets its gRPC health
 * only. Exit code 0 when every row is SERVING, 1 otherwise, 2 on a usage error.
 */
import { parseCommand, printUsage } from "./args.js";
import { healthUsage } from "./usage.js";

/** One row of the table. */
export interface HealthRow {
  /** What it is: `gateway`, `chat`, `trellis (embedded)`, `worker harness/…`. */
  name: string;
  /** How it was reached: the URL asked, or `via <gateway URL>`. */
  url: string;
  status: string;
  ms: string;
}

interface GatewayView {
  object: "health";
  mode: string;
  services: { name: string; status: string; latency_ms: number | null; reason?: string }[];
  workers: { worker_id: string; backend_id: string; status: string; in_process: boolean }[];
  workers_reason?: string;
}

function isGatewayView(value: unknown): value is GatewayView {
  return (
    typeof value === "object" &&
    value !== null &&
    (value as { object?: unknown }).object === "health" &&
    Array.isArray((value as { services?: unknown }).services) &&
    Array.isArray((value as { workers?: unknown }).workers)
  );
}

function reasonOf(error: unknown): string {
  return error instanceof Error ? (error.message.split("\n")[0] ?? "") : String(error);
}

/** The gateway's `GET /v1/health`, or undefined when `url` is no Trellis gateway. */
async function gatewayView(url: string): Promise<GatewayView | undefined> {
  try {
    const response = await fetch(`${url.replace(/\/+$/, "")}/v1/health`, {
      signal: AbortSignal.timeout(5000),
    });
    if (!response.ok) return undefined;
    const body: unknown = await response.json();
    return isGatewayView(body) ? body : undefined;
  } catch {
    return undefined;
  }
}

async function rowsFor(url: string): Promise<HealthRow[]> {
  // Loaded once the arguments are good: a usage error answers without it.
  const { checkHealth } = await import("../health-check.js");
  const started = performance.now();
  let own: HealthRow;
  try {
    const status = await checkHealth(url);
    own = { name: url, url, status, ms: (performance.now() - started).toFixed(1) };
  } catch (error) {
    return [{ name: url, url, status: `UNREACHABLE (${reasonOf(error)})`, ms: "-" }];
  }
  const view = await gatewayView(url);
  if (!view) return [own];
  const via = `via ${url}`;
  const rows = view.services.map((service, i): HealthRow => {
    // The first row is the gateway itself: its own gRPC health, asked directly.
    if (i === 0) return { ...own, name: service.name };
    return {
      name: service.name,
      url: via,
      status: service.reason ? `${service.status} (${service.reason})` : service.status,
      ms: service.latency_ms === null ? "-" : service.latency_ms.toFixed(1),
    };
  });
  for (const worker of view.workers) {
    rows.push({
      name: `worker ${worker.backend_id}${worker.in_process ? " (in process)" : ""}`,
      url: worker.in_process ? via : `${via} (${worker.worker_id})`,
      status: worker.status,
      ms: "-",
    });
  }
  if (view.workers_reason) {
    rows.push({ name: "workers", url: via, status: `UNKNOWN (${view.workers_reason})`, ms: "-" });
  }
  return rows;
}

function table(rows: readonly HealthRow[]): string {
  const header: HealthRow = { name: "SERVICE", url: "URL", status: "STATUS", ms: "MS" };
  const all = [header, ...rows];
  const width = (key: keyof HealthRow) => Math.max(...all.map((r) => r[key].length));
  const line = (r: HealthRow) =>
    `${r.name.padEnd(width("name"))}  ${r.url.padEnd(width("url"))}  ${r.ms.padStart(width("ms"))}  ${r.status}`;
  return `${all.map(line).join("\n")}\n`;
}

/** `trellis health`: one row per service and worker; exit code 1 unless all are SERVING. */
export async function runHealth(
  source: NodeJS.ProcessEnv,
  args: readonly string[] = [],
): Promise<number> {
  const parsed = parseCommand(
    {
      name: "health",
      usage: healthUsage,
      options: { url: { type: "string", multiple: true }, json: { type: "boolean" } },
    },
    args,
  );
  if (parsed.help) return printUsage(healthUsage);
  const urls =
    parsed.values.url && parsed.values.url.length > 0
      ? parsed.values.url
      : [source.TRELLIS_URL ?? `http://127.0.0.1:${source.TRELLIS_PORT ?? "8080"}`];
  const rows = (await Promise.all(urls.map(rowsFor))).flat();
  process.stdout.write(parsed.values.json ? `${JSON.stringify(rows, null, 2)}\n` : table(rows));
  return rows.every((r) => r.status === "SERVING") ? 0 : 1;
}
