/**
 * `trellis dev` of this checkout in a child process with `--expose-gc` and
 * an IPC channel (./fanout-server.ts), for benchmarks that read the server's
 * memory without GC timing noise: {@link gcMemory} asks it to collect
 * garbage twice and answer with `process.memoryUsage()`.
 */
import { type ChildProcess, fork } from "node:child_process";
import { join } from "node:path";
import { untilPrinted } from "@trellis/testkit";
import { repoRoot } from "./proc.js";

/** Options of {@link startGcDev}. */
export interface GcDevOptions {
  port: number;
  dataDir: string;
  /** The admin API key (`TRELLIS_API_KEY`). */
  apiKey: string;
  /** More environment (log level warn, port, data directory and key are set). */
  env?: Record<string, string>;
  /** How long it may take to listen (default 60 s). */
  timeoutMs?: number;
}

/** Start it; resolves once it listens. */
export async function startGcDev(options: GcDevOptions): Promise<ChildProcess> {
  const child = fork(join(repoRoot, "bench/lib/fanout-server.ts"), [], {
    cwd: repoRoot,
    execArgv: ["--expose-gc", "--import", "tsx"],
    env: {
      ...process.env,
      TRELLIS_PORT: String(options.port),
      TRELLIS_DATA_DIR: options.dataDir,
      TRELLIS_API_KEY: options.apiKey,
      TRELLIS_LOG_LEVEL: "warn",
      ...options.env,
    },
    stdio: ["ignore", "pipe", "pipe", "ipc"],
  });
  await untilPrinted(child, /listening on/, "server", options.timeoutMs);
  child.stdout?.resume();
  child.stderr?.resume();
  return child;
}

/** The server's memory after two full garbage collections. */
export function gcMemory(child: ChildProcess, timeoutMs = 60_000): Promise<NodeJS.MemoryUsage> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error("no memory reading from the server")),
      timeoutMs,
    );
    child.once("message", (m) => {
      clearTimeout(timer);
      resolve(m as NodeJS.MemoryUsage);
    });
    child.send("memory");
  });
}
