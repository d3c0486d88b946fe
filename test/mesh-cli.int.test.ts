// `trellis mesh` tells the truth: a process that cannot start (its port taken
// by a server that answers health checks) fails the start and nothing is left
// running; a started mesh prints its gateway, UI and admin key, `trellis
// health` lists every service and worker from the gateway's URL alone, and a
// service that dies later stops the whole mesh with a non-zero exit.
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { createLogger, createService, type TrellisService } from "@trellis/runtime";
import {
  createTestDatabase,
  deleteTestStreams,
  eventually,
  type TestDatabase,
  testNatsUrl,
  uniqueName,
} from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MeshStartError, startMesh } from "../src/mesh.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Processes (pid → command line) whose environment holds `TRELLIS_NATS_PREFIX=<prefix>`. */
function processesOf(prefix: string): Map<number, string> {
  const found = new Map<number, string>();
  const marker = `TRELLIS_NATS_PREFIX=${prefix}\0`;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (!readFileSync(`/proc/${entry}/environ`, "latin1").includes(marker)) continue;
      found.set(
        Number(entry),
        readFileSync(`/proc/${entry}/cmdline`, "latin1").replaceAll("\0", " "),
      );
    } catch {
      // Gone already, or not ours to read.
    }
  }
  return found;
}

function trellis(args: string[], env: Record<string, string>): ChildProcess {
  // The gateway makes (and the mesh prints) an admin key only when none is given.
  const { TRELLIS_API_KEY: _chosen, ...inherited } = process.env;
  return spawn(process.execPath, [join(root, "bin/trellis.js"), ...args], {
    cwd: root,
    env: { ...inherited, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

async function output(child: ChildProcess): Promise<{ code: number | null; out: string }> {
  let out = "";
  child.stdout?.on("data", (c) => (out += c));
  const [code] = (await once(child, "exit")) as [number | null];
  return { code, out };
}

describe("trellis mesh", () => {
  // One database per mesh: the failed start below still makes an admin key.
  let db: TestDatabase;
  let cliDb: TestDatabase;
  const prefixes: string[] = [];

  beforeAll(async () => {
    db = await createTestDatabase("trellis_mesh_dead");
    cliDb = await createTestDatabase("trellis_mesh_cli");
  });

  afterAll(async () => {
    for (const prefix of prefixes) {
      for (const pid of processesOf(prefix).keys()) process.kill(pid, "SIGKILL");
      await deleteTestStreams(prefix);
    }
    await db?.drop();
    await cliDb?.drop();
  });

  describe("when a service's port is taken", () => {
    let squatter: TrellisService;
    beforeAll(async () => {
      // Another server on the gateway's port that answers health checks
      // SERVING, as an embedded Trellis left running would.
      squatter = createService({
        name: "squatter",
        logger: createLogger({ service: "squatter", level: "error", write: () => {} }),
      });
      await squatter.listen({ host: "127.0.0.1", port: 0 });
    });
    afterAll(() => squatter?.close({ graceMs: 0 }));

    it("fails the start naming it and its port, before starting anything", async () => {
      const prefix = uniqueName("meshbusy");
      prefixes.push(prefix);
      const port = squatter.address()?.port as number;
      const error = await startMesh({
        databaseUrl: db.url,
        natsUrl: testNatsUrl,
        natsPrefix: prefix,
        ports: { gateway: port },
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(MeshStartError);
      const failure = (error as MeshStartError).failure;
      expect(failure.name).toBe("gateway");
      expect(failure.reason).toContain(`port ${port} on 127.0.0.1 is already in use`);
      expect([...processesOf(prefix).values()]).toEqual([]);
    }, 60_000);
  });

  it("fails the start when a service dies, with its log, and leaves no process", async () => {
    const prefix = uniqueName("meshdead");
    prefixes.push(prefix);
    const error = await startMesh({
      databaseUrl: db.url,
      natsUrl: testNatsUrl,
      natsPrefix: prefix,
      // Only receipts reads it: it refuses to start, the others are fine.
      env: { TRELLIS_RECEIPT_MODEL_PRICES: "{not json" },
      readyTimeoutMs: 120_000,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MeshStartError);
    const failure = (error as MeshStartError).failure;
    expect(failure.name).toBe("receipts");
    expect(failure.reason).toBe("exited with code 1 before it was ready");
    expect(failure.logTail).toContain("TRELLIS_RECEIPT_MODEL_PRICES");
    expect([...processesOf(prefix).values()]).toEqual([]);
  }, 180_000);

  describe("started from the command line", () => {
    const prefix = uniqueName("meshcli");
    let mesh: ChildProcess;
    let out = "";
    let err = "";
    let gateway = "";

    beforeAll(async () => {
      prefixes.push(prefix);
      const { createServer } = await import("node:net");
      const probe = createServer().listen(0, "127.0.0.1");
      await once(probe, "listening");
      const port = (probe.address() as { port: number }).port;
      await new Promise((done) => probe.close(done));
      mesh = trellis(["mesh"], {
        DATABASE_URL: cliDb.url,
        NATS_URL: testNatsUrl,
        TRELLIS_NATS_PREFIX: prefix,
        TRELLIS_PORT: String(port),
        TRELLIS_MESH_ADAPTER_WORKERS: "1",
      });
      mesh.stdout?.on("data", (c) => (out += c));
      mesh.stderr?.on("data", (c) => (err += c));
      await eventually(async () => (out.includes("Ctrl-C stops it.") ? true : undefined), {
        timeoutMs: 180_000,
        what: `the mesh to say it is up (stderr: ${err.slice(-500)})`,
      });
      gateway = `http://127.0.0.1:${port}`;
    }, 200_000);

    afterAll(() => {
      if (mesh?.exitCode === null) mesh.kill("SIGKILL");
    });

    it("prints the gateway URL, the UI URL and the admin key it made, once", async () => {
      expect(out).toContain(`gateway:         ${gateway}`);
      expect(out).toContain(`operator UI:     ${gateway}/ui`);
      const key = /admin API key: {3}(\S+)/.exec(out)?.[1] as string;
      expect(key).toMatch(/\S{16,}/);
      expect(out.split(key).length - 1).toBe(1);
      const sessions = await fetch(`${gateway}/v1/sessions`, {
        headers: {
          authorization: `Bearer ${key}`,
          "harn-agents-protocol-version": "agents-protocol-2026-04-25",
        },
      });
      expect(sessions.status).toBe(200);
    });

    it("lets trellis health list every service and the worker from the gateway alone", async () => {
      const rows = await eventually(
        async () => {
          const run = await output(trellis(["health", "--url", gateway, "--json"], {}));
          const parsed = JSON.parse(run.out) as { name: string; status: string }[];
          return run.code === 0 && parsed.some((r) => r.name.startsWith("worker"))
            ? parsed
            : undefined;
        },
        { timeoutMs: 60_000, what: "every service and a worker SERVING" },
      );
      expect(rows.slice(0, 5).map((r) => r.name)).toEqual([
        "gateway",
        "chat",
        "tasks",
        "receipts",
        "adapters",
      ]);
      // The mesh's own worker process (in-process backends are listed as such).
      expect(rows.filter((r) => r.name === "worker harness")).toHaveLength(1);
      expect(rows.every((r) => r.status === "SERVING")).toBe(true);
    }, 90_000);

    it("stops everything and exits non-zero when a service dies", async () => {
      const running = processesOf(prefix);
      expect(running.size).toBeGreaterThanOrEqual(6);
      // By default chat runs in the tasks process (TRELLIS_MESH_TOGETHER).
      const tasks = [...running].find(([, cmd]) => cmd.includes("serve tasks,chat"));
      expect([...running.values()].some((cmd) => cmd.includes("services/chat/"))).toBe(false);
      expect(tasks).toBeDefined();
      const exited = once(mesh, "exit");
      process.kill(tasks?.[0] as number, "SIGKILL");
      const [code] = (await exited) as [number | null];
      expect(code).toBe(1);
      expect(err).toContain("trellis mesh: tasks was stopped by SIGKILL");
      expect([...processesOf(prefix).values()]).toEqual([]);
    }, 60_000);
  });
});
