/**
 * The built-in adapter worker as a real process for the worker tests:
 * `node --import tsx src/cli/main.ts serve adapter-worker` (what the container
 * runs), its output collected, its health endpoint asked over gRPC.
 */
import type { ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { health } from "@trellis/contracts/grpc";
import { eventually } from "@trellis/testkit";
import { spawnTsx } from "@trellis/testkit/worker-process";

const cli = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));

/** The tools module the test workers load. */
export const workerToolsModule = fileURLToPath(new URL("./worker-tools.ts", import.meta.url));

/** A started `trellis serve adapter-worker`. */
export interface AdapterWorkerProcess {
  child: ChildProcess;
  /** Its health endpoint, `http://127.0.0.1:<port>`. */
  healthUrl: string;
  output(): string;
  /** The ids it printed in `worker <id> ready` lines. */
  workerIds(): string[];
  /** How often each tool ran in it (its `tool <name> ran …` lines). */
  toolRuns(name: string): number;
  /** `grpc.health.v1.Health/Check` of the whole server. */
  health(): Promise<string>;
  /** Resolves with the exit code (or signal) once it exits. */
  exited: Promise<number | NodeJS.Signals | null>;
  /** Wait for `worker … ready` (every backend pulling work). */
  ready(timeoutMs?: number): Promise<void>;
  kill(): Promise<void>;
  /** SIGTERM, then wait for the exit. */
  stop(): Promise<number | NodeJS.Signals | null>;
}

/** Start the worker with `env` (PORT 0 unless given); resolves once its health endpoint listens. */
export async function startAdapterWorkerProcess(
  env: Record<string, string>,
): Promise<AdapterWorkerProcess> {
  const { child, output } = spawnTsx(cli, ["serve", "adapter-worker"], { PORT: "0", ...env });
  const exited = new Promise<number | NodeJS.Signals | null>((resolve) => {
    child.once("exit", (code, signal) => resolve(code ?? signal));
  });
  let gone = false;
  void exited.then(() => {
    gone = true;
  });
  const healthUrl = await eventually(
    () => {
      if (gone) throw new Error(`the worker exited before it listened:\n${output()}`);
      return /adapter-worker health on (\S+)/.exec(output())?.[1];
    },
    { timeoutMs: 60_000, intervalMs: 50, what: "the adapter worker's health endpoint" },
  ).catch((error: unknown) => {
    child.kill("SIGKILL");
    throw new Error(`${String(error)}\n${output()}`);
  });
  const client = createClient(health.Health, createGrpcTransport({ baseUrl: healthUrl }));
  return {
    child,
    healthUrl,
    exited,
    output,
    workerIds: () => [...output().matchAll(/^worker (\S+) ready$/gm)].map((m) => m[1] as string),
    toolRuns: (name) => [...output().matchAll(new RegExp(`^tool ${name} ran `, "gm"))].length,
    async health() {
      const { status } = await client.check({ service: "" }, { timeoutMs: 2000 });
      return health.HealthCheckResponse_ServingStatus[status] ?? String(status);
    },
    async ready(timeoutMs = 60_000) {
      await eventually(
        () => {
          if (gone) throw new Error("the worker exited");
          return /^worker \S+ ready$/m.test(output());
        },
        { timeoutMs, intervalMs: 50, what: "the adapter worker to be ready" },
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}\n${output()}`);
      });
    },
    async kill() {
      if (!gone) child.kill("SIGKILL");
      await exited;
    },
    async stop() {
      if (!gone) child.kill("SIGTERM");
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
