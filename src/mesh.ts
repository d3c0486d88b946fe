/**
 * Distributed mode on one machine: every service as its own process against
 * real PostgreSQL and NATS JetStream. `trellis mesh` runs it in the foreground;
 * end-to-end and fault suites drive it through {@link startMesh}.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { createWriteStream, mkdirSync } from "node:fs";
import { createServer } from "node:net";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { meshSecretFileVariable, meshSecretVariable, urlVariable } from "@trellis/platform";
import { checkHealth } from "./health-check.js";
import { assertPortFree, PortInUseError } from "./ports.js";
import { allServices } from "./services.js";

export { parseTogether } from "./mesh-groups.js";

const root = resolve(fileURLToPath(new URL("..", import.meta.url)));

/** Options of {@link startMesh}. */
export interface MeshOptions {
  databaseUrl: string;
  natsUrl: string;
  /** NATS subject / stream prefix, unique per test run. */
  natsPrefix?: string;
  /** Services to start (default: all). */
  services?: readonly string[];
  /**
   * Services run together in one process (`trellis serve a,b`), e.g.
   * `[["tasks", "chat"]]`: the process is named after the first, listens on
   * its port and serves the others too (their `urls` and
   * `TRELLIS_<NAME>_URL` are its); `pids` names it by its first service,
   * and `kill` or `restart` of any of its services acts on it. Default:
   * every service in a process of its own.
   */
  together?: readonly (readonly string[])[];
  /** Ports per service (default: free ports; the gateway on 8080 only if asked). */
  ports?: Record<string, number>;
  /** Where each service's stdout/stderr goes (default: ./.trellis/mesh-logs). */
  logDir?: string;
  /** Extra env for every process. */
  env?: Record<string, string>;
  /** Extra node flags for every process (e.g. `--cpu-prof`, not allowed in NODE_OPTIONS). */
  nodeArgs?: readonly string[];
  /** How long to wait for every service to be SERVING (default 60 s). */
  readyTimeoutMs?: number;
  /**
   * Built-in adapter workers to run beside the services (`trellis serve
   * adapter-worker`, the harness backend; default 0). Named `adapter-worker`,
   * `adapter-worker-2`, … in `urls`, `kill` and `restart`.
   */
  adapterWorkers?: number;
  /** Called as each process becomes SERVING during the start (progress). */
  onReady?: (name: string) => void;
  /**
   * Called when a process of a started mesh exits without being asked to
   * (not through `kill`, `restart` or `stop`), with the tail of its output.
   */
  onExit?: (failure: MeshProcessFailure) => void;
}

/** A process of the mesh that failed: which, how, and the end of its output. */
export interface MeshProcessFailure {
  name: string;
  /** What happened, e.g. `exited with code 1 before it was ready`. */
  reason: string;
  /** The last lines it wrote (stdout and stderr). */
  logTail: string;
}

/** The mesh could not start: names the process that failed and why. */
export class MeshStartError extends Error {
  override readonly name = "MeshStartError";
  constructor(readonly failure: MeshProcessFailure) {
    super(`${failure.name} ${failure.reason}`);
  }
}

/** A running mesh. */
export interface Mesh {
  urls: Readonly<Record<string, string>>;
  /**
   * The service credential secret the services share (`TRELLIS_MESH_SECRET`),
   * for tests that call an internal service directly, as a mesh peer.
   */
  meshSecret: string | undefined;
  /** SIGKILL a service's process (crash; with it, the services it hosts). */
  kill(name: string): Promise<void>;
  /** Start a stopped or killed service's process again, and wait until it is SERVING. */
  restart(name: string): Promise<void>;
  /** Stop everything (SIGTERM, then SIGKILL after a grace period). */
  stop(): Promise<void>;
  /** Process ids of the running services (for CPU accounting in benchmarks). */
  pids(): Record<string, number>;
  /**
   * The admin API key the gateway generated at this start (it prints a new
   * key once, when its database has none); undefined when it kept one.
   */
  adminKey: string | undefined;
}

// How much of each process's latest output is kept for a failure report.
const tailBytes = 4000;

function lastLines(text: string, count = 15): string {
  return text.trimEnd().split("\n").slice(-count).join("\n");
}

async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  server.close();
  if (address === null || typeof address === "string") throw new Error("no port");
  return address.port;
}

export { checkHealth };

function exitReason(proc: ChildProcess): string | undefined {
  if (proc.exitCode !== null) return `exited with code ${proc.exitCode}`;
  if (proc.signalCode !== null) return `was stopped by ${proc.signalCode}`;
  return undefined;
}

/** Resolves once `url` answers SERVING while `proc` lives; rejects with the reason it never will. */
async function waitServing(url: string, timeoutMs: number, proc: ChildProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "not started";
  while (Date.now() < deadline) {
    const exited = exitReason(proc);
    if (exited) throw new Error(`${exited} before it was ready`);
    try {
      last = await checkHealth(url, 1000);
      if (last === "SERVING" && exitReason(proc) === undefined) return;
    } catch (error) {
      last = String(error);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`at ${url} was not SERVING after ${timeoutMs} ms (last: ${last})`);
}

/**
 * Fails when a process's port is taken: another server there would answer
 * the health checks for a process that cannot bind it.
 */
async function assertFree(name: string, port: number): Promise<void> {
  try {
    await assertPortFree("127.0.0.1", port, `the ${name} port`, name);
  } catch (error) {
    if (!(error instanceof PortInUseError)) throw error;
    throw new MeshStartError({
      name,
      reason: `cannot listen: port ${port} on 127.0.0.1 is already in use`,
      logTail: "",
    });
  }
}

/** Start the services as separate processes; resolves when all are SERVING. */
export async function startMesh(options: MeshOptions): Promise<Mesh> {
  const workerNames = Array.from({ length: options.adapterWorkers ?? 0 }, (_, i) =>
    i === 0 ? "adapter-worker" : `adapter-worker-${i + 1}`,
  );
  // A service hosted by another's process: its name → the host's.
  const hostOf = new Map<string, string>();
  for (const group of options.together ?? []) {
    const [host, ...guests] = group;
    if (host === undefined) continue;
    for (const guest of guests) {
      if (hostOf.has(guest) || guest === host)
        throw new Error(`startMesh: ${guest} is in more than one process`);
      hostOf.set(guest, host);
    }
  }
  const guestsOf = (host: string) => [...hostOf].filter(([, h]) => h === host).map(([g]) => g);
  const names = [
    ...(options.services ?? allServices.map((s) => s.name)).filter((n) => !hostOf.has(n)),
    ...workerNames,
  ];
  const logDir = options.logDir ?? join(root, ".trellis", "mesh-logs");
  mkdirSync(logDir, { recursive: true });
  const ports: Record<string, number> = {};
  for (const name of [...allServices.map((s) => s.name), ...workerNames])
    ports[name] = options.ports?.[name] ?? (await freePort());
  const urls: Record<string, string> = {};
  const baseEnv: Record<string, string> = {
    ...(process.env as Record<string, string>),
    DATABASE_URL: options.databaseUrl,
    NATS_URL: options.natsUrl,
    TRELLIS_NATS_PREFIX: options.natsPrefix ?? "trellis",
    ...options.env,
  };
  // Every service of the mesh shares one service credential secret; made here
  // when none is configured (services refuse calls without it).
  if (!baseEnv[meshSecretVariable] && !baseEnv[meshSecretFileVariable]) {
    baseEnv[meshSecretVariable] = randomBytes(32).toString("base64url");
  }
  for (const [name, port] of Object.entries(ports)) {
    urls[name] = `http://127.0.0.1:${ports[hostOf.get(name) ?? name] ?? port}`;
    if (!workerNames.includes(name)) baseEnv[urlVariable(name)] = urls[name];
  }
  const procs = new Map<string, ChildProcess>();
  const tails = new Map<string, string>();
  // Processes stopped on purpose (kill, restart, stop): their exit is no failure.
  const stopping = new Set<ChildProcess>();
  const timeout = options.readyTimeoutMs ?? 60_000;
  let adminKey: string | undefined;
  let gatewayOutput = "";

  const launch = (name: string): ChildProcess => {
    const log = createWriteStream(join(logDir, `${name}.log`), { flags: "a" });
    const guests = guestsOf(name);
    const entry = workerNames.includes(name)
      ? [join(root, "src", "cli", "main.ts"), "serve", "adapter-worker"]
      : guests.length
        ? [join(root, "src", "cli", "main.ts"), "serve", [name, ...guests].join(",")]
        : [join(root, "services", name, "src", "main.ts")];
    const proc = spawn(
      process.execPath,
      [...(options.nodeArgs ?? []), "--import", "tsx", ...entry],
      {
        cwd: root,
        env: { ...baseEnv, PORT: String(ports[name]) },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    proc.stdout?.pipe(log);
    proc.stderr?.pipe(log);
    tails.set(name, "");
    const keep = (chunk: Buffer) => {
      tails.set(name, `${tails.get(name) ?? ""}${chunk.toString("utf8")}`.slice(-tailBytes));
    };
    proc.stdout?.on("data", keep);
    proc.stderr?.on("data", keep);
    if (name === "gateway") {
      // A generated admin key is printed once, on stdout, before the gateway serves.
      const watch = (chunk: Buffer) => {
        gatewayOutput = `${gatewayOutput}${chunk.toString("utf8")}`.slice(-64_000);
        const found = /Trellis admin API key[^\n]*\n\s+(\S+)/.exec(gatewayOutput);
        if (found) {
          adminKey = found[1];
          gatewayOutput = "";
          proc.stdout?.off("data", watch);
        }
      };
      proc.stdout?.on("data", watch);
    }
    proc.on("exit", () => {
      if (stopping.has(proc) || !started) return;
      options.onExit?.({
        name,
        reason: exitReason(proc) ?? "exited",
        logTail: lastLines(tails.get(name) ?? ""),
      });
    });
    procs.set(name, proc);
    return proc;
  };
  let started = false;

  const stopOne = async (name: string, signal: NodeJS.Signals, graceMs: number) => {
    const proc = procs.get(name);
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    stopping.add(proc);
    const exited = once(proc, "exit");
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(timer);
  };

  for (const name of names) await assertFree(name, ports[name] as number);
  try {
    // Services do not need each other at start (clients connect lazily), so
    // they boot side by side.
    await Promise.all(
      names.map(async (name) => {
        try {
          await waitServing(urls[name] as string, timeout, launch(name));
        } catch (error) {
          // Let the last output arrive before it is reported.
          await new Promise((r) => setTimeout(r, 100));
          throw new MeshStartError({
            name,
            reason: error instanceof Error ? error.message : String(error),
            logTail: lastLines(tails.get(name) ?? ""),
          });
        }
        options.onReady?.(name);
      }),
    );
  } catch (error) {
    await Promise.all([...procs.keys()].map((n) => stopOne(n, "SIGKILL", 0)));
    throw error;
  }
  started = true;

  return {
    urls,
    adminKey,
    meshSecret: baseEnv[meshSecretVariable],
    async kill(service) {
      await stopOne(hostOf.get(service) ?? service, "SIGKILL", 0);
    },
    async restart(service) {
      // A service hosted by another's process restarts with that process.
      const name = hostOf.get(service) ?? service;
      await stopOne(name, "SIGTERM", 5000);
      await assertFree(name, ports[name] as number);
      const proc = launch(name);
      try {
        await waitServing(urls[name] as string, timeout, proc);
      } catch (error) {
        throw new Error(`${name} ${error instanceof Error ? error.message : String(error)}`);
      }
    },
    pids() {
      const result: Record<string, number> = {};
      for (const [name, proc] of procs)
        if (proc.pid !== undefined && proc.exitCode === null) result[name] = proc.pid;
      return result;
    },
    async stop() {
      await Promise.all([...procs.keys()].reverse().map((n) => stopOne(n, "SIGTERM", 10_000)));
    },
  };
}
