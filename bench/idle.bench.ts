import { createDatabase } from "@trellis/storage";
import { sql } from "kysely";
import { startBenchMesh } from "./lib/mesh.js";
import { cpuMsIfRunning, startDev } from "./lib/proc.js";
import { bearerTransport } from "./lib/transport.js";
import { chatTurnOps } from "./turn.bench.js";

const API_KEY = "trellis_idle_bench_key_0123456789abcdef";

/** CPU of one process over the window. */
export interface IdleProcess {
  name: string;
  cpuMsPerSecond: number;
}

/** One mode's figures. */
export interface IdleResult {
  mode: "embedded" | "distributed";
  windowMs: number;
  processes: IdleProcess[];
  totalCpuMsPerSecond: number;
}

/** Options of {@link runIdleBench}. */
export interface IdleBenchOptions {
  windowMs?: number;
  settleMs?: number;
}

function positive(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === "") return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive whole number of ms, not ${JSON.stringify(text)}`);
  }
  return value;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function sample(
  named: () => Promise<Record<string, number>>,
  windowMs: number,
): Promise<IdleProcess[]> {
  const before = new Map<string, { pid: number; cpu: number }>();
  for (const [name, pid] of Object.entries(await named())) {
    const cpu = cpuMsIfRunning(pid);
    if (cpu !== undefined) before.set(name, { pid, cpu });
  }
  await sleep(windowMs);
  const after = await named();
  const rows: IdleProcess[] = [];
  for (const [name, pid] of Object.entries(after)) {
    const start = before.get(name);
    const cpu = cpuMsIfRunning(pid);
    if (cpu === undefined) continue;
    // A process that appeared during the window counts from zero: an upper bound.
    const used = start && start.pid === pid ? cpu - start.cpu : cpu;
    rows.push({ name, cpuMsPerSecond: (used * 1000) / windowMs });
  }
  return rows;
}

function result(mode: IdleResult["mode"], windowMs: number, rows: IdleProcess[]): IdleResult {
  return {
    mode,
    windowMs,
    processes: rows,
    totalCpuMsPerSecond: rows.reduce((s, r) => s + r.cpuMsPerSecond, 0),
  };
}

async function oneTurn(baseUrl: string): Promise<void> {
  const transport = bearerTransport(baseUrl, API_KEY);
  const op = await chatTurnOps(transport);
  await op(0, 0);
}

async function idleEmbedded(windowMs: number, settleMs: number): Promise<IdleResult> {
  const dev = await startDev({ apiKey: API_KEY, tmpPrefix: "trellis-idle-" });
  const { child } = dev;
  try {
    await oneTurn(dev.baseUrl);
    await sleep(settleMs);
    const rows = await sample(async () => ({ trellis: child.pid as number }), windowMs);
    return result("embedded", windowMs, rows);
  } finally {
    await dev.stop();
  }
}

async function idleDistributed(windowMs: number, settleMs: number): Promise<IdleResult> {
  const { mesh, db, stop } = await startBenchMesh("idle", {
    adapterWorkers: 1,
    readyTimeoutMs: 180_000,
    env: { TRELLIS_API_KEY: API_KEY, TRELLIS_LOG_LEVEL: "warn" },
  });
  // Backends of the mesh's database, seen through a connection of our own
  // (left out of the figures: it only asks twice).
  const name = decodeURIComponent(new URL(db.url).pathname.slice(1));
  const observer = await createDatabase({
    kind: "postgres",
    url: db.url,
    poolSize: 1,
    applicationName: "trellis-idle-bench",
  });
  const named = async (): Promise<Record<string, number>> => {
    const out: Record<string, number> = { ...mesh.pids() };
    const { rows } = await sql<{ pid: number; application_name: string }>`
      select pid, application_name from pg_stat_activity
      where datname = ${name} and pid <> pg_backend_pid()`.execute(observer.kysely);
    for (const row of rows) {
      out[`postgres ${row.application_name || "backend"} #${row.pid}`] = row.pid;
    }
    return out;
  };
  try {
    await oneTurn(mesh.urls.gateway as string);
    await sleep(settleMs);
    const rows = await sample(named, windowMs);
    return result("distributed", windowMs, rows);
  } finally {
    await observer.close().catch(() => undefined);
    await stop();
  }
}

/** Both modes, one after the other (never side by side). */
export async function runIdleBench(options: IdleBenchOptions = {}): Promise<IdleResult[]> {
  const windowMs = options.windowMs ?? positive("TRELLIS_BENCH_IDLE_MS", 30_000);
  const settleMs = options.settleMs ?? positive("TRELLIS_BENCH_IDLE_SETTLE_MS", 10_000);
  return [await idleEmbedded(windowMs, settleMs), await idleDistributed(windowMs, settleMs)];
}

/** The figures as a table per mode. */
export function formatIdleBench(results: readonly IdleResult[]): string {
  const lines = ["idle CPU: ms of CPU per second of wall time, per process, nothing happening"];
  for (const r of results) {
    lines.push(`\n${r.mode} (window ${Math.round(r.windowMs / 1000)} s)`);
    const postgres = r.processes.filter((p) => p.name.startsWith("postgres "));
    const own = r.processes.filter((p) => !p.name.startsWith("postgres "));
    for (const p of own) lines.push(`  ${p.name.padEnd(24)} ${p.cpuMsPerSecond.toFixed(2)}`);
    if (postgres.length > 0) {
      const sum = postgres.reduce((s, p) => s + p.cpuMsPerSecond, 0);
      lines.push(`  ${`postgres (${postgres.length} backends)`.padEnd(24)} ${sum.toFixed(2)}`);
    }
    lines.push(`  ${"total".padEnd(24)} ${r.totalCpuMsPerSecond.toFixed(2)}`);
  }
  return lines.join("\n");
}
