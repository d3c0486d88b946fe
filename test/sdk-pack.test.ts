// The publishable SDK: `npm run build:sdk` bundles @trellis/adapter-sdk (its
// private workspace packages inlined) to JS + .d.ts and packs it; the example
// in clients/node-worker-example, copied outside the monorepo, installs the
// tarball, type-checks against the shipped declarations and runs with plain
// `node` as a gRPC worker of `trellis dev`: a chat turn through the gateway
// reaches it, streams, and completes.
import { type ChildProcess, spawn } from "node:child_process";
import {
  cpSync,
  existsSync,
  lstatSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { create, type JsonObject } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChatService } from "@trellis/contracts/chat";
import { MessageSchema, Role } from "@trellis/contracts/core";
import { AgentService } from "@trellis/contracts/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTrellisDev, type TrellisDev } from "./support/trellis-dev.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** Runs a command to its end (killed past `timeoutMs`); its exit code and output. */
function run(
  command: string,
  args: string[],
  cwd: string,
  timeoutMs: number,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout?.on("data", (chunk) => {
      out += chunk;
    });
    child.stderr?.on("data", (chunk) => {
      out += chunk;
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", reject);
    child.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** This process's environment without what would load TypeScript or vitest hooks into `node`. */
function plainEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  delete env.NODE_OPTIONS;
  for (const key of Object.keys(env)) if (key.startsWith("VITEST")) delete env[key];
  return env;
}

describe("the published SDK tarball outside the monorepo", () => {
  const dir = mkdtempSync(join(tmpdir(), "trellis-sdk-pack-"));
  const example = join(dir, "example");
  let tarball = "";
  let dev: TrellisDev | undefined;
  let worker: ChildProcess | undefined;
  let workerOut = "";
  let typecheck: Promise<{ code: number | null; out: string }> | undefined;

  beforeAll(async () => {
    const built = await run(
      "node",
      ["scripts/build-sdk.mjs", "--out", join(dir, "build")],
      root,
      120_000,
    );
    expect(built.code, built.out).toBe(0);
    tarball = built.out.trim().split("\n").at(-1) ?? "";
    expect(existsSync(tarball), built.out).toBe(true);

    cpSync(join(root, "clients/node-worker-example"), example, { recursive: true });
    // Public dependencies come from npm's cache (filled by the repo's `npm ci`).
    const installed = await run(
      "npm",
      ["install", "--prefer-offline", "--no-audit", "--no-fund", tarball],
      example,
      90_000,
    );
    expect(installed.code, installed.out).toBe(0);
    // Type-check the example against the shipped declarations while the rest runs.
    writeFileSync(
      join(example, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2022",
          allowJs: true,
          checkJs: true,
          noEmit: true,
          strict: true,
          skipLibCheck: false,
          types: ["node"],
          typeRoots: [join(root, "node_modules/@types")],
        },
        files: ["worker.mjs"],
      }),
    );
    typecheck = run(
      process.execPath,
      [join(root, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.json"],
      example,
      120_000,
    );
  }, 240_000);

  afterAll(async () => {
    worker?.kill("SIGKILL");
    await dev?.stop();
    rmSync(dir, { recursive: true, force: true });
  }, 60_000);

  it("packs JS, declarations and a manifest with public dependencies only", async () => {
    const manifest = JSON.parse(
      readFileSync(join(example, "node_modules/@trellis/adapter-sdk/package.json"), "utf8"),
    );
    expect(manifest.exports["."]).toMatchObject({ default: "./dist/index.js" });
    expect(existsSync(join(example, "node_modules/@trellis/adapter-sdk", manifest.types))).toBe(
      true,
    );
    const deps = Object.keys(manifest.dependencies);
    expect(deps).toContain("@connectrpc/connect-node");
    expect(deps.filter((name) => name.startsWith("@trellis/"))).toEqual([]);
    // A real copy, not a link into the monorepo; no private package installed beside it.
    expect(lstatSync(join(example, "node_modules/@trellis/adapter-sdk")).isSymbolicLink()).toBe(
      false,
    );
    expect(existsSync(join(example, "node_modules/@trellis/contracts"))).toBe(false);
    const js = readFileSync(
      join(example, "node_modules/@trellis/adapter-sdk/dist/index.js"),
      "utf8",
    );
    expect(js).not.toMatch(/from\s+["']@trellis\//);
  });

  it("runs with plain node as a gRPC worker: a chat turn through the gateway completes", async () => {
    dev = await startTrellisDev(
      { TRELLIS_API_KEY: "" },
      (dataDir) => existsSync(join(dataDir, "data", "admin-api-key")),
      150_000,
    );
    const keyFile = join(dev.dataDir, "data", "admin-api-key");
    const key = readFileSync(keyFile, "utf8").trim();
    worker = spawn(process.execPath, ["worker.mjs"], {
      cwd: example,
      env: plainEnv({
        TRELLIS_URL: dev.url,
        TRELLIS_API_KEY_FILE: keyFile,
        TRELLIS_BACKEND: "node-echo",
        TRELLIS_WORD_DELAY_MS: "10",
      }),
      stdio: ["ignore", "pipe", "pipe"],
    });
    worker.stdout?.on("data", (chunk) => {
      workerOut += chunk;
    });
    worker.stderr?.on("data", (chunk) => {
      workerOut += chunk;
    });
    const deadline = Date.now() + 30_000;
    while (!/worker \S+ ready/.test(workerOut)) {
      if (worker.exitCode !== null || Date.now() > deadline) {
        throw new Error(`the example worker did not get ready:\n${workerOut}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    const transport = createGrpcTransport({
      baseUrl: dev.url,
      interceptors: [
        (next) => (req) => {
          req.header.set("authorization", `Bearer ${key}`);
          return next(req);
        },
      ],
    });
    const agents = createClient(AgentService, transport);
    const chat = createClient(ChatService, transport);
    const agentId = (
      await agents.createAgent({
        agent: { name: "node-echo", backend: "node-echo", definition: {} as JsonObject },
      })
    ).agent?.id as string;
    const chunks: string[] = [];
    let outcome: { kind: { case: string | undefined; value?: unknown } } | undefined;
    for await (const res of chat.sendStreaming({
      sessionId: `ses_sdk_${Date.now()}`,
      agentId,
      message: create(MessageSchema, {
        role: Role.USER,
        parts: [{ kind: { case: "text", value: { text: "hello from a tarball" } } }],
      }),
    })) {
      if (res.kind.case === "chunk" && res.kind.value.kind.case === "textDelta") {
        chunks.push(res.kind.value.kind.value.text);
      }
      if (res.kind.case === "outcome") outcome = res.kind.value;
    }
    const shown = JSON.stringify(outcome, (_k, v) => (typeof v === "bigint" ? String(v) : v));
    expect(outcome?.kind.case, `${shown}\n${workerOut}`).toBe("completed");
    // Streamed as deltas (the gateway may merge them), not only in the final reply.
    expect(chunks.length).toBeGreaterThan(0);
    expect(chunks.join("")).toBe("echo: hello from a tarball");
    expect(shown).toContain("echo: hello from a tarball");

    // SIGTERM: it deregisters and exits cleanly.
    const exited = new Promise<number | null>((resolve) => worker?.once("exit", resolve));
    worker.kill("SIGTERM");
    expect(await exited, workerOut).toBe(0);
  }, 200_000);

  it("the example type-checks against the shipped .d.ts (checkJs, library checks on)", async () => {
    const checked = await (typecheck as Promise<{ code: number | null; out: string }>);
    expect(checked.code, checked.out).toBe(0);
  }, 130_000);
});
