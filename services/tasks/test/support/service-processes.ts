/**
 * The tasks service as child processes (`src/main.ts` under tsx), for the
 * suites that kill -9 it: crash.int.test.ts and lease-takeover.int.test.ts.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { fileURLToPath } from "node:url";

const repoRoot = fileURLToPath(new URL("../../../..", import.meta.url));
const mainPath = fileURLToPath(new URL("../../src/main.ts", import.meta.url));

/** Tasks service processes of one suite; `killAll` in its afterAll. */
export function tasksProcesses() {
  const children: ChildProcess[] = [];
  /** Everything the processes wrote (stdout and stderr), for a failing test's debugging. */
  const logs: string[] = [];
  return {
    logs,
    /** Starts `src/main.ts` with this environment added to the test's. */
    start(env: Record<string, string>): ChildProcess {
      const child = spawn(process.execPath, ["--import", "tsx", mainPath], {
        cwd: repoRoot,
        env: { ...process.env, ...env },
        stdio: ["ignore", "pipe", "pipe"],
      });
      children.push(child);
      for (const stream of [child.stdout, child.stderr]) {
        stream?.setEncoding("utf8");
        stream?.on("data", (chunk: string) => logs.push(chunk));
      }
      return child;
    },
    killAll(): void {
      for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    },
  };
}
