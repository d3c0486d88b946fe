/**
 * Worker processes for integration tests and benchmarks: start, wait until
 * ready, kill; and the `node --import tsx` process they run in.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

/** The repository root: worker scripts run from there (tsx resolves the workspace). */
const root = fileURLToPath(new URL("../../..", import.meta.url));

/** A started worker process and what it printed. */
export interface WorkerProcess {
  child: ChildProcess;
  workerId: string;
  output(): string;
  /** Task ids it ran (its "ran <id>" lines). */
  ran(): string[];
  /** SIGKILL: no goodbye, no more heartbeats. */
  kill(): Promise<void>;
  /** SIGTERM: a clean stop (running work finishes first). */
  stop(): Promise<void>;
}

/**
 * `node --import tsx <script> …args` from the repository root, with `env`
 * over this process's (logging at warn unless `env` says otherwise); what it
 * prints on stdout and stderr is collected in `output()`.
 */
export function spawnTsx(
  script: string,
  args: readonly string[],
  env: Record<string, string>,
): { child: ChildProcess; output(): string } {
  const child = spawn(process.execPath, ["--import", "tsx", script, ...args], {
    cwd: root,
    env: { ...process.env, TRELLIS_LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    output += chunk.toString();
  });
  return { child, output: () => output };
}

/** Start `node --import tsx <script>` with `env`; resolves once it prints "worker <id> ready". */
export async function startWorkerProcess(
  script: string,
  env: Record<string, string>,
  args: readonly string[] = [],
): Promise<WorkerProcess> {
  const { child, output } = spawnTsx(script, args, env);
  const workerId = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`worker not ready in 120 s:\n${output()}`)),
      120_000,
    );
    const check = () => {
      const ready = /worker (\S+) ready/.exec(output());
      if (ready?.[1]) {
        clearTimeout(timer);
        resolve(ready[1]);
      }
    };
    child.stdout?.on("data", check);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`worker exited (${code}) before it was ready:\n${output()}`));
    });
  });
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once("exit", () => resolve());
  });
  return {
    child,
    workerId,
    output,
    ran: () => [...output().matchAll(/^ran (\S+)$/gm)].map((m) => m[1] as string),
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
