/**
 * `trellis mesh`: every service as its own process against PostgreSQL and
 * NATS, in the foreground until Ctrl-C.
 *
 * It starts only when it can keep its word: DATABASE_URL is given (never a
 * silent default), the gateway's port is free, PostgreSQL and NATS answer.
 * It says "up" only when every process is SERVING; when one fails — at the
 * start or later — it names it, shows the end of its log, stops everything it
 * started and exits 1.
 *
 * Its arguments, then its settings, are checked before PostgreSQL's client
 * and the mesh (every service's definition) are loaded.
 */
import { createConnection } from "node:net";
import { join } from "node:path";
import type { Mesh, MeshProcessFailure } from "../mesh.js";
import { parseTogether } from "../mesh-groups.js";
import { assertPortFree } from "../ports.js";
import { parseCommand, printUsage, UsageError } from "./args.js";
import { createProgress } from "./progress.js";
import { meshUsage } from "./usage.js";

const logDir = ".trellis/mesh-logs";

function withTail(failure: MeshProcessFailure): string {
  const log = join(logDir, `${failure.name}.log`);
  const tail = failure.logTail
    ? `\n  last lines of its output (${log}):\n${failure.logTail
        .split("\n")
        .map((l) => `    ${l}`)
        .join("\n")}`
    : `\n  (it wrote nothing; see ${log})`;
  return `trellis mesh: ${failure.name} ${failure.reason}${tail}\n`;
}

/** Fails fast when PostgreSQL does not answer or the database is missing. */
async function checkPostgres(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, "")) || "(default)";
  const { createDatabase } = await import("@trellis/storage");
  try {
    const db = await createDatabase({
      kind: "postgres",
      url,
      poolSize: 1,
      applicationName: "trellis-mesh-check",
    });
    try {
      await Promise.race([
        db.ping(),
        new Promise((_, reject) => setTimeout(() => reject(new Error("no answer in 5 s")), 5000)),
      ]);
    } finally {
      await db.close().catch(() => undefined);
    }
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    const hint = /does not exist/.test(reason)
      ? `create it first (createdb -h ${target.hostname} -p ${target.port || 5432} ${name})`
      : "is PostgreSQL running there? (DATABASE_URL)";
    throw new Error(
      `cannot use database ${name} at ${target.hostname}:${target.port || 5432}: ${reason}; ${hint}`,
    );
  }
}

/** Fails fast when nothing listens at the NATS address. */
async function checkNats(url: string): Promise<void> {
  const first = url.split(",")[0]?.trim() ?? url;
  const target = new URL(first.includes("://") ? first : `nats://${first}`);
  const host = target.hostname || "127.0.0.1";
  const port = Number(target.port || 4222);
  await new Promise<void>((resolve, reject) => {
    const socket = createConnection({ host, port });
    const fail = (reason: string) => {
      socket.destroy();
      reject(
        new Error(`cannot reach NATS at ${host}:${port} (${reason}); is it running? (NATS_URL)`),
      );
    };
    socket.setTimeout(5000, () => fail("no answer in 5 s"));
    socket.once("error", (error) => fail(error.message));
    socket.once("connect", () => {
      socket.destroy();
      resolve();
    });
  });
}

/**
 * Resolves true once the gateway's `GET /v1/health` lists `count` workers
 * outside the adapters process, else with what it saw last.
 */
async function waitForWorkers(
  gateway: string,
  count: number,
  timeoutMs: number,
): Promise<true | string> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer from GET /v1/health";
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${gateway}/v1/health`, { signal: AbortSignal.timeout(5000) });
      const body = (await response.json()) as { workers?: { in_process?: boolean }[] };
      const seen = (body.workers ?? []).filter((w) => w.in_process === false).length;
      if (seen >= count) return true;
      last = `${seen} of ${count} adapter worker(s) registered after ${Math.round(timeoutMs / 1000)} s`;
    } catch (error) {
      last = `GET ${gateway}/v1/health failed (${error instanceof Error ? error.message : String(error)})`;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return last;
}

/** `trellis mesh`: every service as its own process until Ctrl-C or a failure. */
export async function runMesh(
  source: NodeJS.ProcessEnv,
  args: readonly string[] = [],
): Promise<number> {
  const parsed = parseCommand({ name: "mesh", usage: meshUsage, options: {} }, args);
  if (parsed.help) return printUsage(meshUsage);
  if (!source.DATABASE_URL) {
    throw new UsageError(
      "DATABASE_URL is required: the PostgreSQL database the mesh keeps its schemas in " +
        "(e.g. createdb trellis, then DATABASE_URL=postgres://postgres@127.0.0.1:5432/trellis trellis mesh)",
      "mesh",
      meshUsage,
    );
  }
  const { loadConfig, meshConfigSchema } = await import("./settings.js");
  const config = loadConfig(meshConfigSchema, source);
  const { createLogger, onShutdownSignals } = await import("@trellis/runtime");
  const logger = createLogger({ service: "mesh" });
  let together: string[][];
  try {
    together = parseTogether(config.TRELLIS_MESH_TOGETHER);
  } catch (error) {
    throw new UsageError(
      `TRELLIS_MESH_TOGETHER: ${error instanceof Error ? error.message : String(error)}`,
      "mesh",
      meshUsage,
    );
  }

  await assertPortFree("127.0.0.1", config.TRELLIS_PORT, "TRELLIS_PORT", "the mesh's gateway");
  await checkPostgres(config.DATABASE_URL);
  await checkNats(config.NATS_URL);
  const { MeshStartError, startMesh } = await import("../mesh.js");

  const guests = together.reduce((sum, group) => sum + group.length - 1, 0);
  const total = 5 - guests + config.TRELLIS_MESH_ADAPTER_WORKERS;
  const ready: string[] = [];
  const step = createProgress().start(`Starting the mesh (${total} processes)`);
  let failed: ((failure: MeshProcessFailure) => void) | undefined;
  const failure = new Promise<MeshProcessFailure>((resolve) => {
    failed = resolve;
  });
  let mesh: Mesh;
  try {
    mesh = await startMesh({
      databaseUrl: config.DATABASE_URL,
      natsUrl: config.NATS_URL,
      natsPrefix: config.TRELLIS_NATS_PREFIX,
      ports: { gateway: config.TRELLIS_PORT },
      adapterWorkers: config.TRELLIS_MESH_ADAPTER_WORKERS,
      together,
      readyTimeoutMs: 90_000,
      onReady: (name) => {
        ready.push(name);
        step.update(`${ready.length}/${total} ready (${name})`);
      },
      onExit: (exited) => failed?.(exited),
    });
  } catch (error) {
    if (error instanceof MeshStartError) {
      step.fail(`${error.failure.name} failed`);
      process.stderr.write(withTail(error.failure));
      process.stderr.write("trellis mesh: stopped every process it had started\n");
      return 1;
    }
    step.fail();
    throw error;
  }
  const gateway = mesh.urls.gateway as string;
  // SERVING workers are not yet useful: they must also have registered with
  // the adapters service, as the gateway's health view shows.
  const workers = config.TRELLIS_MESH_ADAPTER_WORKERS;
  if (workers > 0) {
    step.update(`waiting for ${workers} adapter worker(s) to register`);
    const registered = await waitForWorkers(gateway, workers, 60_000);
    if (registered !== true) {
      step.fail("adapter workers did not register");
      process.stderr.write(
        `trellis mesh: ${registered}; see ${join(logDir, "adapter-worker.log")} and ${join(logDir, "adapters.log")}\n` +
          "trellis mesh: stopping every process it started\n",
      );
      await mesh.stop();
      return 1;
    }
  }
  step.done();

  const rows = Object.entries(mesh.urls).map(([name, url]) => `  ${name.padEnd(16)} ${url}`);
  const key = source.TRELLIS_API_KEY
    ? "  admin API key:   the one in TRELLIS_API_KEY"
    : mesh.adminKey
      ? `  admin API key:   ${mesh.adminKey}\n                   (shown once; keep it safe, or set TRELLIS_API_KEY)`
      : "  admin API key:   unchanged (shown when the gateway first made it; set TRELLIS_API_KEY to choose one)";
  process.stdout.write(
    [
      "",
      `Trellis mesh is up: every process is SERVING (logs in ${logDir})`,
      `  gateway:         ${gateway}`,
      `  operator UI:     ${gateway}/ui`,
      key,
      `  check it:        trellis health --url ${gateway}`,
      "",
      ...rows,
      "",
      "Ctrl-C stops it.",
      "",
    ].join("\n"),
  );

  return new Promise<number>((done) => {
    let finished = false;
    failure.then(async (exited) => {
      if (finished) return;
      finished = true;
      process.stderr.write(withTail(exited));
      process.stderr.write("trellis mesh: stopping every process it started\n");
      await mesh.stop();
      done(1);
    });
    onShutdownSignals(
      async () => {
        if (finished) return;
        finished = true;
        await mesh.stop();
        done(0);
      },
      { logger, exit: false },
    );
  });
}
