/**
 * The built-in adapter worker's health follows NATS: a worker started while
 * NATS is down listens and reports NOT_SERVING (it waits, it does not crash),
 * becomes SERVING and registers once NATS is up, and reports NOT_SERVING
 * again while NATS is away. A throwaway nats-server, never the shared one.
 * Bad configuration stops it at once with one clear line.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { eventually, ThrowawayNats } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AdapterWorkerProcess, startAdapterWorkerProcess } from "./worker-support.js";

let nats: ThrowawayNats;
let worker: AdapterWorkerProcess | undefined;

beforeAll(async () => {
  nats = await ThrowawayNats.start();
  await nats.stop();
});

afterAll(async () => {
  await worker?.kill();
  await nats?.dispose();
});

const status = (w: AdapterWorkerProcess) => () => w.health().catch((e: unknown) => String(e));

describe("adapter worker health", () => {
  it("is NOT_SERVING while NATS is unreachable, SERVING while it is reachable", async () => {
    worker = await startAdapterWorkerProcess({
      NATS_URL: nats.url,
      TRELLIS_NATS_PREFIX: "workerhealth",
      TRELLIS_ADAPTERS_WORK_STORAGE: "memory",
      TRELLIS_STARTUP_TIMEOUT: "2m",
    });
    const w = worker;
    expect(await w.health()).toBe("NOT_SERVING");
    expect(w.workerIds()).toEqual([]);

    await nats.start();
    await w.ready(30_000);
    await eventually(async () => (await status(w)()) === "SERVING", {
      timeoutMs: 15_000,
      what: "SERVING once NATS is up",
    });
    expect(w.workerIds()).toEqual([expect.stringMatching(/^harness-/)]);

    await nats.stop();
    await eventually(async () => (await status(w)()) === "NOT_SERVING", {
      timeoutMs: 15_000,
      what: "NOT_SERVING while NATS is down",
    });
    expect(w.child.exitCode).toBeNull();

    await nats.start();
    await eventually(async () => (await status(w)()) === "SERVING", {
      timeoutMs: 30_000,
      what: "SERVING again after NATS came back",
    });
    expect(await w.stop()).toBe(0);
  });

  it("refuses bad configuration with one clear line and exit code 1", () => {
    const cli = fileURLToPath(new URL("../../../src/cli/main.ts", import.meta.url));
    const run = (env: Record<string, string>, args = ["serve", "adapter-worker"]) =>
      spawnSync(process.execPath, ["--import", "tsx", cli, ...args], {
        env: { ...process.env, PORT: "0", NATS_URL: nats.url, ...env },
        encoding: "utf8",
        timeout: 60_000,
      });
    const backends = run({ TRELLIS_WORKER_BACKENDS: "harness,telepathy" });
    expect(backends.status).toBe(1);
    expect(backends.stderr).toContain(
      'trellis-adapter-worker: cannot start: invalid configuration: TRELLIS_WORKER_BACKENDS must list backends among harness, scripted, got unknown "telepathy"',
    );
    // The container picks it by TRELLIS_SERVICE as well.
    const tools = run(
      { TRELLIS_SERVICE: "adapter-worker", TRELLIS_HARNESS_TOOLS: "/nonexistent/tools.mjs" },
      ["serve"],
    );
    expect(tools.status).toBe(1);
    expect(tools.stderr).toMatch(
      /cannot start: invalid configuration: TRELLIS_HARNESS_TOOLS: cannot load \/nonexistent\/tools\.mjs/,
    );
    expect(tools.stderr.trim().split("\n")).toHaveLength(1);
  });
});
