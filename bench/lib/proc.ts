/**
 * Child processes for benchmarks, and the CPU they use (read from /proc, so
 * the server's cost is measured apart from the load generator's).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, untilPrinted } from "@trellis/testkit";

const CLOCK_TICKS_PER_SECOND = 100;

/** user + system CPU of a process and its threads so far, in ms (Linux). */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may contain spaces) start after ") ".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return ((utime + stime) * 1000) / CLOCK_TICKS_PER_SECOND;
}

/** {@link cpuMs}, or undefined when the process is gone (it exited or closed). */
export function cpuMsIfRunning(pid: number): number | undefined {
  try {
    return cpuMs(pid);
  } catch {
    return undefined;
  }
}

/** Resident set size of a process, in bytes (Linux: VmRSS of /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? 0) * 1024;
}

/** Total CPU ms of several processes. */
export function totalCpuMs(pids: readonly number[]): number {
  return pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
}

/** Repository root. */
export const repoRoot = fileURLToPath(new URL("../..", import.meta.url));

/**
 * Start `node …nodeArgs --import tsx <script> …args` (in `cwd`, default this checkout)
 * and wait for a line matching `ready`.
 */
export async function startNode(
  script: string,
  args: readonly string[],
  env: Record<string, string>,
  ready: RegExp,
  timeoutMs = 60_000,
  cwd = repoRoot,
  nodeArgs: readonly string[] = [],
): Promise<ChildProcess> {
  const child = spawn(process.execPath, [...nodeArgs, "--import", "tsx", script, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  await untilPrinted(child, ready, script, timeoutMs);
  // Keep draining output so the child never blocks on a full pipe.
  child.stdout?.resume();
  child.stderr?.resume();
  return child;
}

/** Stop a child (SIGTERM, SIGKILL after `graceMs`) and wait for it. */
export async function stopChild(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/**
 * Rate limits and the daily task quota out of reach, as in the peer harness:
 * a turn benchmark measures the turn, and at a quiet moment it sends more
 * than the default 3,000 submits a minute per agent.
 */
export const limitsOutOfReach: Readonly<Record<string, string>> = {
  TRELLIS_RATE_LIMIT_AGENT: "1000000000/1m",
  TRELLIS_RATE_LIMIT_ACTOR: "1000000000/1m",
  TRELLIS_RATE_LIMIT_WORKSPACE: "1000000000/1m",
  TRELLIS_QUOTA_TASKS_PER_DAY: "1000000000",
};

/** Options of {@link startDev}. */
export interface DevOptions {
  /** The admin API key (`TRELLIS_API_KEY`). */
  apiKey: string;
  /** Start of the temporary data directory's name, e.g. `trellis-bench-auth-`. */
  tmpPrefix: string;
  /** More environment (`TRELLIS_PORT`, `TRELLIS_DATA_DIR` and the key are set). */
  env?: Record<string, string>;
  /** How long it may take to listen (default 60 s). */
  timeoutMs?: number;
  /** The checkout to run (default this one). */
  root?: string;
  /** Node options before the script, e.g. `--cpu-prof`. */
  nodeArgs?: readonly string[];
}

/** A running `trellis dev`. */
export interface DevProcess {
  child: ChildProcess;
  port: number;
  /** `http://127.0.0.1:<port>`. */
  baseUrl: string;
  dataDir: string;
  /** Stop it (SIGKILL after `graceMs`) and remove its data directory. */
  stop(graceMs?: number): Promise<void>;
}

/** Start `trellis dev` of a checkout on a free port with a fresh data directory (log level warn). */
export async function startDev(options: DevOptions): Promise<DevProcess> {
  const root = options.root ?? repoRoot;
  const dataDir = await mkdtemp(join(tmpdir(), options.tmpPrefix));
  const port = await freePort();
  let child: ChildProcess;
  try {
    child = await startNode(
      join(root, "src/cli/main.ts"),
      ["dev"],
      {
        TRELLIS_PORT: String(port),
        TRELLIS_DATA_DIR: dataDir,
        TRELLIS_API_KEY: options.apiKey,
        TRELLIS_LOG_LEVEL: "warn",
        ...options.env,
      },
      /listening on/,
      options.timeoutMs,
      root,
      options.nodeArgs,
    );
  } catch (error) {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  }
  return {
    child,
    port,
    baseUrl: `http://127.0.0.1:${port}`,
    dataDir,
    async stop(graceMs) {
      await stopChild(child, graceMs);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
