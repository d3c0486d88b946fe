import { pathToFileURL } from "node:url";
import { createLeases, journalMigrations, leaseMigrations, migrate } from "@trellis/storage";
import { cpuByPid, cpuSince, openBenchDatabases } from "./lib/databases.js";
import { medians } from "./lib/windows.js";

/** Options of {@link runLeaseBench}. */
export interface LeaseBenchOptions {
  /** Held lease counts measured (default [1, 1000]). */
  counts?: number[];
  /** Rounds per window (default 20); 3 windows, the median is reported. */
  rounds?: number;
  databaseUrl?: string;
}

/** One measured point. */
export interface LeaseBenchPoint {
  backend: "pglite" | "postgres";
  leases: number;
  /** Wall time of one round (ms). */
  roundMs: number;
  /** CPU of this process per round (ms). */
  clientCpuMs: number;
  /** CPU of the Postgres backends per round (ms; 0 on PGlite). */
  serverCpuMs: number;
}

/** Runs the benchmark; one point per backend and lease count. */
export async function runLeaseBench(options: LeaseBenchOptions = {}): Promise<LeaseBenchPoint[]> {
  const counts = options.counts ?? [1, 1000];
  const rounds = options.rounds ?? 20;
  const points: LeaseBenchPoint[] = [];
  for (const backend of await openBenchDatabases({
    bench: "lease",
    poolSize: 4,
    databaseUrl: options.databaseUrl,
  })) {
    try {
      for (const count of counts) {
        const schema = `lbench_${count}`;
        await migrate(backend.database, {
          schema,
          migrations: { ...journalMigrations(schema), ...leaseMigrations(schema) },
        });
        // Renewal only by hand: the timer's period is far past the run.
        const leases = createLeases({
          database: backend.database,
          schema,
          ttlMs: 3_600_000,
          renewEveryMs: 3_000_000,
          maxLeases: count,
        });
        for (let i = 0; i < count; i++) await leases.acquire(`ses_${i}`);
        await leases.renew(); // warm-up
        const windows: { roundMs: number; clientCpuMs: number; serverCpuMs: number }[] = [];
        for (let w = 0; w < 3; w++) {
          const pids = await backend.serverPids();
          const server0 = cpuByPid(pids);
          const cpu0 = process.cpuUsage();
          const t0 = performance.now();
          for (let r = 0; r < rounds; r++) {
            const lost = await leases.renew();
            if (lost.length > 0) throw new Error(`lease bench lost ${lost.length} leases`);
          }
          const wall = performance.now() - t0;
          const cpu = process.cpuUsage(cpu0);
          const server = cpuSince(server0, cpuByPid(pids));
          windows.push({
            roundMs: wall / rounds,
            clientCpuMs: (cpu.user + cpu.system) / 1000 / rounds,
            serverCpuMs: server / rounds,
          });
        }
        points.push({ backend: backend.name, leases: count, ...medians(windows) });
        await leases.close();
      }
    } finally {
      await backend.close();
    }
  }
  return points;
}

/** The points as the table `npm run bench` prints. */
export function formatLeaseBench(points: readonly LeaseBenchPoint[]): string {
  const header = ["backend ", "leases", "round ms", "client CPU ms", "server CPU ms"];
  const rows = points.map((p) => [
    p.backend.padEnd(8),
    String(p.leases).padStart(6),
    p.roundMs.toFixed(2).padStart(8),
    p.clientCpuMs.toFixed(2).padStart(13),
    p.serverCpuMs.toFixed(2).padStart(13),
  ]);
  return [
    "lease bench: one renewal round of every held lease (one statement); per round, median of 3 windows",
    ...[header, ...rows].map((cells) => cells.join("  ")),
  ].join("\n");
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  console.log(formatLeaseBench(await runLeaseBench()));
}
