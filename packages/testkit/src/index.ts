/**
 * Test helpers shared by every integration suite: a throwaway database per test
 * file on the real Postgres server, and unique names for NATS streams, so runs
 * never collide.
 */
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import type { DescMethod } from "@bufbuild/protobuf";
import {
  ConnectError,
  createContextValues,
  createHandlerContext,
  type Interceptor,
} from "@connectrpc/connect";
import pg from "pg";

/** Postgres server the integration tests use (CI's `.ci/run` sets it). */
export const testDatabaseServerUrl =
  process.env.TRELLIS_TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";

/** NATS server the integration tests use. */
export const testNatsUrl = process.env.TRELLIS_TEST_NATS_URL ?? "nats://127.0.0.1:4222";

/** A short random suffix, safe in database names and NATS subjects. */
export function uniqueSuffix(): string {
  return `${Date.now().toString(36)}${randomBytes(4).toString("hex")}`;
}

/** A unique name with a readable prefix, e.g. `uniqueName("evt")` → `evt_lx3…`. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${uniqueSuffix()}`;
}

/** A database created for one test file; drop it when done. */
export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

function withDatabase(serverUrl: string, database: string): string {
  const url = new URL(serverUrl);
  url.pathname = `/${database}`;
  return url.toString();
}

/** Create a fresh database on the test server. */
export async function createTestDatabase(prefix = "trellis_test"): Promise<TestDatabase> {
  const name = uniqueName(prefix).toLowerCase();
  const admin = new pg.Client({ connectionString: testDatabaseServerUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  return {
    name,
    url: withDatabase(testDatabaseServerUrl, name),
    async drop() {
      const c = new pg.Client({ connectionString: testDatabaseServerUrl });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}

/** Wait until `check` returns a truthy value, polling; throws after `timeoutMs`. */
export async function eventually<T>(
  check: () => T | Promise<T>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value) return value as NonNullable<T>;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${options.what ?? "condition"}${last ? `: ${String(last)}` : ""}`,
      );
    }
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25));
  }
}

/**
 * Resolve once `child` has printed (stdout or stderr) text matching `ready`;
 * reject, with what it printed, when it exits first or after `timeoutMs`.
 * `what` names the child in those errors.
 */
export function untilPrinted(
  child: ChildProcess,
  ready: RegExp,
  what: string,
  timeoutMs = 60_000,
): Promise<void> {
  let output = "";
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${what} not ready in ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (ready.test(output)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`${what} exited (${code}) before it was ready:\n${output}`));
    });
  });
}

/** How a process run by {@link runProcess} ended, and what it printed. */
export interface ProcessRun {
  code: number | null;
  out: string;
  err: string;
}

/**
 * Run `command` to its end and collect what it prints. Waits for "close",
 * not "exit": the exit can come before the pipes have given all output. With
 * `timeoutMs` the process is killed (SIGKILL) when it runs longer.
 */
export async function runProcess(
  command: string,
  args: readonly string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<ProcessRun> {
  const { spawn } = await import("node:child_process");
  const child = spawn(command, args, {
    ...(options.cwd === undefined ? {} : { cwd: options.cwd }),
    env: options.env ?? process.env,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  let err = "";
  child.stdout.on("data", (chunk) => {
    out += chunk;
  });
  child.stderr.on("data", (chunk) => {
    err += chunk;
  });
  const timer =
    options.timeoutMs === undefined
      ? undefined
      : setTimeout(() => child.kill("SIGKILL"), options.timeoutMs);
  try {
    const [code] = (await once(child, "close")) as [number | null];
    return { code, out, err };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Delete the JetStream streams a test run created under `prefix` (the
 * `<PREFIX>_*` streams of the event log and signal bus), so runs leave
 * nothing behind on the shared server.
 */
export async function deleteTestStreams(prefix: string, servers = testNatsUrl): Promise<void> {
  const { connect } = await import("@nats-io/transport-node");
  const { jetstreamManager } = await import("@nats-io/jetstream");
  const nc = await connect({ servers });
  try {
    const jsm = await jetstreamManager(nc);
    const wanted = `${prefix.toUpperCase().replace(/[^A-Z0-9_]/g, "_")}_`;
    for await (const info of jsm.streams.list()) {
      if (info.config.name.startsWith(wanted)) await jsm.streams.delete(info.config.name);
    }
  } finally {
    await nc.close();
  }
}

/** A free TCP port on loopback. */
export async function freePort(): Promise<number> {
  const { createServer } = await import("node:net");
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A free loopback port below Linux's ephemeral range (32768–60999), for a
 * server that is stopped and started again on the same port: a port from
 * {@link freePort} lies in that range, so while the server is down an
 * outgoing connection of any process may take it as its local port and the
 * restart then cannot bind. Falls back to {@link freePort}.
 */
export async function restartablePort(): Promise<number> {
  const { createServer } = await import("node:net");
  const bindable = (port: number) =>
    new Promise<boolean>((resolve) => {
      const server = createServer();
      server.once("error", () => resolve(false));
      server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
    });
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (await bindable(port)) return port;
  }
  return freePort();
}

/** Options of {@link ThrowawayNats.start}. */
export interface ThrowawayNatsOptions {
  /** More nats-server arguments (TLS, auth). */
  args?: string[];
  /** How the readiness check connects (to a server that needs TLS or auth). */
  connect?: Partial<import("@nats-io/transport-node").ConnectionOptions>;
}

/**
 * A throwaway nats-server with JetStream (file storage in its own temp dir) on
 * a free loopback port, for tests that stop and restart the server. Never the
 * shared one on :4222.
 */
export class ThrowawayNats {
  #child: import("node:child_process").ChildProcess | undefined;
  private constructor(
    readonly port: number,
    readonly dir: string,
    private readonly options: ThrowawayNatsOptions,
  ) {}

  /** Create and start one. */
  static async start(options: ThrowawayNatsOptions = {}): Promise<ThrowawayNats> {
    const { mkdtemp } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const server = new ThrowawayNats(
      await restartablePort(),
      await mkdtemp(join(tmpdir(), "trellis-nats-")),
      options,
    );
    await server.start();
    return server;
  }

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  /** Start (again), keeping the same port and data dir; resolves once it accepts connections. */
  async start(): Promise<void> {
    const { spawn } = await import("node:child_process");
    const { connect } = await import("@nats-io/transport-node");
    const bin = process.env.NATS_SERVER_BIN ?? "nats-server";
    const args = ["-js", "-a", "127.0.0.1", "-p", String(this.port), "-sd", this.dir];
    this.#child = spawn(bin, [...args, ...(this.options.args ?? [])], {
      stdio: "ignore",
      env: { ...process.env, PATH: `${process.env.PATH ?? ""}:/usr/sbin:/usr/local/sbin` },
    });
    await eventually(
      async () => {
        const nc = await connect({
          servers: this.url,
          maxReconnectAttempts: 0,
          timeout: 500,
          ...this.options.connect,
        });
        await nc.close();
        return true;
      },
      { timeoutMs: 15_000, what: "the throwaway nats-server to accept connections" },
    );
  }

  /** Graceful stop (SIGTERM), as in a rolling restart. */
  async stop(): Promise<void> {
    const child = this.#child;
    this.#child = undefined;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    child.kill("SIGTERM");
    await exited;
  }

  /** Stop and delete its data. */
  async dispose(): Promise<void> {
    await this.stop();
    const { rm } = await import("node:fs/promises");
    await rm(this.dir, { recursive: true, force: true });
  }
}

/**
 * The context Connect gives a handler, for calling the handler directly (no
 * server): `requestSignal` plays the client, aborting it is the client
 * leaving. Tests of what a streaming handler holds once its client is gone
 * drive it this way, since Connect never resumes such a handler.
 */
export function directCallContext(
  method: DescMethod,
  requestSignal: AbortSignal,
): ReturnType<typeof createHandlerContext> {
  return createHandlerContext({
    service: method.parent,
    method,
    protocolName: "connect",
    requestMethod: "POST",
    url: `http://localhost/${method.parent.typeName}/${method.name}`,
    requestSignal,
    contextValues: createContextValues(),
  });
}

/** A client interceptor that sends `key` as the bearer credential of every call. */
export function bearer(key: string): Interceptor {
  return (next) => (req) => {
    req.header.set("authorization", `Bearer ${key}`);
    return next(req);
  };
}

/** The {@link ConnectError} a call must fail with; throws when it succeeds. */
export async function callFailure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (error) {
    return ConnectError.from(error);
  }
  throw new Error("the call succeeded");
}
