/**
 * The built-in worker's settings and tool modules: defaults, the health
 * port's precedence, and clear `config_invalid` errors naming the variable
 * for backends it does not have and tool modules that are not tool lists.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadHarnessTools } from "@trellis/execution";
import { isTrellisError } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadAdapterWorkerConfig } from "../src/worker/config.js";
import { workerToolsModule } from "./worker-support.js";

function refusal(run: () => unknown): { param: string | undefined; message: string } {
  try {
    run();
  } catch (error) {
    if (isTrellisError(error) && error.reason === "config_invalid") {
      return { param: error.param, message: error.message };
    }
    throw error;
  }
  throw new Error("accepted");
}

async function refusalOf(run: () => Promise<unknown>) {
  const error = await run().then(
    () => new Error("accepted"),
    (e: unknown) => e,
  );
  if (!isTrellisError(error) || error.reason !== "config_invalid") throw error;
  return { param: error.param, message: error.message };
}

describe("loadAdapterWorkerConfig", () => {
  it("runs the harness on port 7005 by default", () => {
    const config = loadAdapterWorkerConfig({});
    expect(config.backends).toEqual(["harness"]);
    expect(config.port).toBe(7005);
    expect(config.NATS_URL).toBe("nats://127.0.0.1:4222");
    expect(config.DATABASE_URL).toBeUndefined();
  });

  it("listens on PORT, else TRELLIS_PORT", () => {
    expect(loadAdapterWorkerConfig({ TRELLIS_PORT: "7100" }).port).toBe(7100);
    expect(loadAdapterWorkerConfig({ PORT: "7200", TRELLIS_PORT: "7100" }).port).toBe(7200);
    expect(loadAdapterWorkerConfig({ PORT: "0" }).port).toBe(0);
  });

  it("runs the backends TRELLIS_WORKER_BACKENDS lists, once each", () => {
    const config = loadAdapterWorkerConfig({
      TRELLIS_WORKER_BACKENDS: " scripted, harness ,scripted",
    });
    expect(config.backends).toEqual(["scripted", "harness"]);
  });

  it("refuses unknown backends, an empty list and a bad port, naming the variable", () => {
    expect(
      refusal(() => loadAdapterWorkerConfig({ TRELLIS_WORKER_BACKENDS: "harness,gpt" })),
    ).toEqual({
      param: "TRELLIS_WORKER_BACKENDS",
      message:
        'invalid configuration: TRELLIS_WORKER_BACKENDS must list backends among harness, scripted, got unknown "gpt"',
    });
    expect(refusal(() => loadAdapterWorkerConfig({ TRELLIS_WORKER_BACKENDS: " , " })).param).toBe(
      "TRELLIS_WORKER_BACKENDS",
    );
    expect(refusal(() => loadAdapterWorkerConfig({ PORT: "http" })).param).toBe("PORT");
    expect(
      refusal(() => loadAdapterWorkerConfig({ DATABASE_URL: "mysql://db/x" })).message,
    ).toContain("DATABASE_URL must be a URL with scheme postgres or postgresql");
  });
});

describe("loadHarnessTools", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trellis-tools-"));
    await writeFile(
      join(dir, "clock.mjs"),
      `export default [{ name: "clock", description: "The time.", inputSchema: { type: "object" }, run: () => "noon" }];\n`,
    );
    await writeFile(join(dir, "not-a-list.mjs"), `export const tools = { name: "clock" };\n`);
    await writeFile(
      join(dir, "no-run.mjs"),
      `export const tools = [{ name: "clock", description: "x", inputSchema: {} }];\n`,
    );
    await writeFile(join(dir, "broken.mjs"), "export const tools = [;\n");
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("has no tools when unset", async () => {
    expect(await loadHarnessTools(undefined)).toEqual([]);
    expect(await loadHarnessTools(" ")).toEqual([]);
  });

  it("loads the tools export or the default export of each module, relative to cwd", async () => {
    const tools = await loadHarnessTools(`${workerToolsModule}, clock.mjs`, dir);
    expect(tools.map((t) => t.name)).toEqual(["get_weather", "clock"]);
    expect(
      await tools[1]?.run(
        {},
        {
          taskId: "t",
          sessionId: "s",
          workspaceId: "w",
          toolCallId: "c",
          signal: new AbortController().signal,
          now: () => "2026-11-22T12:00:00.000Z",
          secret: () => undefined,
        },
      ),
    ).toBe("noon");
  });

  it("refuses modules that are missing, broken, or not lists of tools, and duplicate names", async () => {
    const load = (spec: string) => refusalOf(() => loadHarnessTools(spec, dir));
    expect((await load("missing.mjs")).message).toMatch(
      /^invalid configuration: TRELLIS_HARNESS_TOOLS: cannot load missing\.mjs: /,
    );
    expect((await load("broken.mjs")).message).toContain("cannot load broken.mjs");
    expect((await load("not-a-list.mjs")).message).toBe(
      'invalid configuration: TRELLIS_HARNESS_TOOLS: not-a-list.mjs must export an array of tools as "tools" or as its default export',
    );
    expect((await load("no-run.mjs")).message).toContain(
      "no-run.mjs: tool 0 needs a name, a description, an inputSchema object and a run function",
    );
    const twice = await load("clock.mjs,./clock.mjs");
    expect(twice).toEqual({
      param: "TRELLIS_HARNESS_TOOLS",
      message:
        "invalid configuration: TRELLIS_HARNESS_TOOLS: tool clock is exported by both clock.mjs and ./clock.mjs",
    });
  });
});
