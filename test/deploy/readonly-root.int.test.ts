// The container's promise without a container engine: Trellis runs as a
// non-root user (UID 10001, as in the Dockerfile and deploy/k8s) on a
// read-only root filesystem with only /tmp writable (the emptyDir), against
// the real PostgreSQL and NATS. bubblewrap (Debian's bwrap) provides the
// read-only bind mount and the user namespace; `trellis migrate` and two
// services (`trellis serve tasks`, `trellis serve gateway`) must work in it.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import {
  createTestDatabase,
  deleteTestStreams,
  freePort,
  type TestDatabase,
  testNatsUrl,
  uniqueName,
} from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { checkHealth } from "../../src/mesh.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const sandbox = [
  "--ro-bind",
  "/",
  "/",
  "--dev",
  "/dev",
  "--proc",
  "/proc",
  "--tmpfs",
  "/tmp",
  "--unshare-user",
  "--uid",
  "10001",
  "--gid",
  "10001",
  "--die-with-parent",
  "--chdir",
  root,
];

const probe = spawnSync(
  "bwrap",
  [...sandbox, "sh", "-c", "id -u; touch /tmp/ok; ! touch package.json"],
  {
    encoding: "utf8",
  },
);
const usable = probe.status === 0 && probe.stdout.trim() === "10001";
if (!usable) {
  console.warn(
    `deploy: bubblewrap cannot make a read-only, non-root sandbox here (${probe.error?.message ?? probe.stderr.trim()}); install bubblewrap (apt-get install bubblewrap) and allow user namespaces`,
  );
}

function inSandbox(args: string[], env: Record<string, string>): ChildProcess {
  return spawn("bwrap", [...sandbox, process.execPath, `${root}bin/trellis.js`, ...args], {
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
}

describe.skipIf(!usable)("Trellis on a read-only root filesystem as UID 10001", () => {
  let db: TestDatabase;
  const prefix = uniqueName("rofs");
  const running: ChildProcess[] = [];
  const logs: string[] = [];
  let env: Record<string, string>;

  beforeAll(async () => {
    db = await createTestDatabase("trellis_rofs");
    env = {
      DATABASE_URL: db.url,
      NATS_URL: testNatsUrl,
      TRELLIS_NATS_PREFIX: prefix,
      TRELLIS_MESH_SECRET: randomBytes(36).toString("base64url"),
      OTEL_SDK_DISABLED: "true",
    };
  });
  afterAll(async () => {
    for (const child of running) {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = once(child, "exit");
        child.kill("SIGKILL");
        await exited;
      }
    }
    await db?.drop();
    await deleteTestStreams(prefix);
  });

  it("migrates, then serves tasks and the gateway until SERVING", async () => {
    const migrate = inSandbox(["migrate"], env);
    let migrateLog = "";
    migrate.stdout?.on("data", (c) => {
      migrateLog += c;
    });
    migrate.stderr?.on("data", (c) => {
      migrateLog += c;
    });
    const [code] = (await once(migrate, "exit")) as [number | null];
    expect(code, migrateLog).toBe(0);
    expect(migrateLog).toMatch(/tasks: applied \d+/);

    const ports = { tasks: await freePort(), gateway: await freePort() };
    const urls = {
      TRELLIS_TASKS_URL: `http://127.0.0.1:${ports.tasks}`,
      TRELLIS_GATEWAY_URL: `http://127.0.0.1:${ports.gateway}`,
    };
    for (const [service, port] of Object.entries(ports)) {
      const child = inSandbox(["serve", service], { ...env, ...urls, PORT: String(port) });
      const index = logs.push("") - 1;
      child.stdout?.on("data", (c) => {
        logs[index] += c;
      });
      child.stderr?.on("data", (c) => {
        logs[index] += c;
      });
      running.push(child);
    }
    for (const [service, port] of Object.entries(ports)) {
      const deadline = Date.now() + 60_000;
      let status = "not started";
      while (status !== "SERVING") {
        const exited = running.find((c) => c.exitCode !== null);
        if (exited) throw new Error(`a service exited (${exited.exitCode}): ${logs.join("\n")}`);
        if (Date.now() > deadline) throw new Error(`${service}: ${status}; ${logs.join("\n")}`);
        status = await checkHealth(`http://127.0.0.1:${port}`, 1000).catch((e) => String(e));
        if (status !== "SERVING") await new Promise((r) => setTimeout(r, 200));
      }
      expect(status).toBe("SERVING");
    }
    // The logs are JSON lines on stdout; nothing complains about a read-only path.
    expect(logs.join("\n")).not.toMatch(/EROFS|EACCES|read-only file system/i);
  }, 120_000);
});
