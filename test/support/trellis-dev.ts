/**
 * `trellis dev` as `npm start` runs it, for tests that need the real entry
 * point: a child process on a free port with its own data directory.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "@trellis/testkit";

const root = fileURLToPath(new URL("../..", import.meta.url));

/** A running `trellis dev`. */
export interface TrellisDev {
  url: string;
  /** The process's data directory (`TRELLIS_DATA_DIR`). */
  dataDir: string;
  /** Everything it printed so far, stdout and stderr. */
  output(): string;
  /** SIGTERM, wait for the exit, remove the data directory. */
  stop(): Promise<void>;
}

/**
 * Starts `trellis dev` with `env` on top of this process's environment and
 * resolves once it listens and `ready` (extra condition, e.g. a file it
 * writes) holds; fails with its output when it exits or takes over
 * `timeoutMs` (default 60 s).
 */
export async function startTrellisDev(
  env: Record<string, string>,
  ready: (dataDir: string) => boolean = () => true,
  timeoutMs = 60_000,
): Promise<TrellisDev> {
  const dataDir = mkdtempSync(join(tmpdir(), "trellis-dev-"));
  const port = await freePort();
  let output = "";
  const child: ChildProcess = spawn(process.execPath, [join(root, "bin/trellis.js"), "dev"], {
    cwd: root,
    env: { ...process.env, TRELLIS_PORT: String(port), TRELLIS_DATA_DIR: dataDir, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout?.on("data", (chunk) => {
    output += chunk;
  });
  child.stderr?.on("data", (chunk) => {
    output += chunk;
  });
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + timeoutMs;
  while (!(output.includes("is listening on") && ready(dataDir))) {
    const problem =
      child.exitCode !== null
        ? "exited"
        : Date.now() > deadline
          ? `did not start within ${timeoutMs / 1000} s`
          : undefined;
    if (problem) {
      await stop();
      throw new Error(`trellis dev ${problem}:\n${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url: `http://127.0.0.1:${port}`, dataDir, output: () => output, stop };
}
