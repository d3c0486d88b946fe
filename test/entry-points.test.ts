// Bad input at Trellis's own entry points gets a clear error, never a crash or
// a stack trace: the `trellis` CLI, and garbage bodies on the Connect routes.
// (Malformed binary bodies and the other protocol-level refusals are covered
// in packages/runtime/test/protocol-hardening.test.ts and test/fuzz.)
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { allServices } from "../src/services.js";

const root = fileURLToPath(new URL("..", import.meta.url));

/** CLI processes running at once, at most {@link maxRunning} (the machine is shared). */
const maxRunning = 4;
let running = 0;
const waiting: (() => void)[] = [];

async function acquire(): Promise<void> {
  if (running < maxRunning) {
    running++;
    return;
  }
  // release() hands its slot over: `running` stays as it is.
  await new Promise<void>((take) => waiting.push(take));
}

function release(): void {
  const next = waiting.shift();
  if (next) next();
  else running--;
}

/** Run the CLI as a user would (bin/trellis.js); the cases are independent, so they run side by side. */
async function trellis(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number | null; out: string; err: string }> {
  await acquire();
  try {
    const child = spawn(process.execPath, [join(root, "bin/trellis.js"), ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => (out += chunk));
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (err += chunk));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    try {
      // "close": the process has exited and its output is all read.
      const [code] = (await once(child, "close")) as [number | null];
      return { code, out, err };
    } finally {
      clearTimeout(timer);
    }
  } finally {
    release();
  }
}

describe.concurrent("trellis CLI with bad input", () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trellis-cli-"));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses an unknown command with the usage and exit code 2", async () => {
    const { code, err } = await trellis(["launch-rockets"]);
    expect(code).toBe(2);
    expect(err).toContain('unknown command "launch-rockets"');
    expect(err).toContain("Usage: trellis");
  });

  it("refuses to serve a service it does not have, naming the ones it has", async () => {
    const [unknown, unnamed] = await Promise.all([
      trellis(["serve", "warp-drive"], { TRELLIS_SERVICE: "" }),
      trellis(["serve"], { TRELLIS_SERVICE: "" }),
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.err).toContain('unknown service "warp-drive"');
    expect(unknown.err).toContain("gateway");
    expect(unnamed.code).toBe(2);
    expect(unnamed.err).toMatch(/name a service/);
    expect(`${unknown.err}${unnamed.err}`).not.toMatch(/\n\s+at /);
  });

  it("refuses a list of services one process cannot host, naming why", async () => {
    const cases = await Promise.all(
      [
        ["tasks,warp-drive"],
        ["tasks,tasks"],
        ["tasks,gateway"],
        ["adapter-worker,chat"],
        [","],
      ].map((args) => trellis(["serve", ...args], { TRELLIS_SERVICE: "" })),
    );
    for (const result of cases) {
      expect(result.code).toBe(2);
      expect(result.err).toContain("Usage: trellis serve");
      expect(result.err).not.toMatch(/\n\s+at /);
    }
    const [unknown, twice, gateway, worker, empty] = cases.map((c) => c.err);
    expect(unknown).toContain('unknown service "warp-drive"');
    expect(twice).toContain("names a service twice");
    expect(gateway).toContain("gateway runs in a process of its own");
    expect(worker).toContain("adapter-worker runs in a process of its own");
    expect(empty).toContain('unknown service ""');
  });

  it("names an unknown option in one line, with the usage and exit code 2", async () => {
    const { code, err } = await trellis(["health", "--colour", "red"]);
    expect(code).toBe(2);
    expect(err).toMatch(/^trellis health: .*colour/);
    expect(err).toContain("Usage: trellis health");
    expect(err).not.toMatch(/\n\s+at /);
  });

  it("reports an unreachable or nonsense URL as a row, not a crash", async () => {
    const { code, out, err } = await trellis([
      "health",
      "--url",
      "not a url",
      "--url",
      "http://127.0.0.1:9",
    ]);
    expect(code).toBe(1);
    expect(out).toMatch(/not a url .* UNREACHABLE/);
    expect(out).toMatch(/127\.0\.0\.1:9 .* UNREACHABLE/);
    expect(err).toBe("");
  });

  it("names the bad variable when embedded mode is misconfigured", async () => {
    const { code, err } = await trellis(["dev"], { TRELLIS_PORT: "eighty" });
    expect(code).toBe(1);
    expect(err).toMatch(/^trellis: .*TRELLIS_PORT/);
    expect(err).not.toMatch(/\n\s+at /);
  });

  it("names the bad variable when the event window is nonsense", async () => {
    const values = ["lots", "0", "99", "1e9", "20000.5"];
    const runs = await Promise.all(
      values.map((value) => trellis(["dev"], { TRELLIS_EVENT_WINDOW: value })),
    );
    for (const { code, err } of runs) {
      expect(code).toBe(1);
      expect(err).toMatch(/^trellis: .*TRELLIS_EVENT_WINDOW/);
      expect(err).not.toMatch(/\n\s+at /);
    }
  });

  it("names the bad variable when the mesh's worker count is nonsense", async () => {
    const values = ["many", "-1", "99"];
    const runs = await Promise.all(
      values.map((value) =>
        trellis(["mesh"], {
          TRELLIS_MESH_ADAPTER_WORKERS: value,
          DATABASE_URL: "postgres://postgres@127.0.0.1:5432/trellis_never_used",
        }),
      ),
    );
    for (const { code, err } of runs) {
      expect(code).toBe(1);
      expect(err).toContain("TRELLIS_MESH_ADAPTER_WORKERS");
      expect(err).not.toMatch(/\n\s+at /);
    }
  });

  it("names the bad variable when the protocol between services is nonsense", async () => {
    const values = ["http3", "GRPC ", "rest"];
    const runs = await Promise.all(
      values.map((value) =>
        trellis(["serve", "receipts"], {
          TRELLIS_SERVICE: "",
          TRELLIS_SERVICE_PROTOCOL: value,
          DATABASE_URL: "postgres://postgres@127.0.0.1:5432/trellis_never_used",
        }),
      ),
    );
    for (const { code, err } of runs) {
      expect(code).toBe(1);
      expect(err).toContain("TRELLIS_SERVICE_PROTOCOL must be one of connect, grpc");
      expect(err).not.toMatch(/\n\s+at /);
    }
  });

  it("names the bad variable when the mesh's grouping of services is nonsense", async () => {
    const values = ["tasks,warp-drive", "tasks,chat;chat,receipts", "gateway,chat"];
    const runs = await Promise.all(
      values.map((value) =>
        trellis(["mesh"], {
          TRELLIS_MESH_TOGETHER: value,
          DATABASE_URL: "postgres://postgres@127.0.0.1:5432/trellis_never_used",
        }),
      ),
    );
    const reasons = [
      "unknown service",
      "chat is named twice",
      "gateway runs in a process of its own",
    ];
    for (const [i, { code, err }] of runs.entries()) {
      expect(code).toBe(2);
      expect(err).toContain("TRELLIS_MESH_TOGETHER");
      expect(err).toContain(reasons[i]);
      expect(err).not.toMatch(/\n\s+at /);
    }
  });

  it("says the server is unreachable rather than failing obscurely", async () => {
    const { code, err } = await trellis([
      "receipts",
      "verify",
      "rcpt_1",
      "--url",
      "http://127.0.0.1:9",
    ]);
    expect(code).toBe(2);
    expect(err).toMatch(
      /^trellis receipts verify: cannot reach Trellis at http:\/\/127\.0\.0\.1:9/,
    );
  });

  it("refuses a receipt file that is missing or not JSON, saying which", async () => {
    const garbage = join(dir, "garbage.json");
    await writeFile(garbage, "{this is not json");
    const key = join(dir, "key.pem");
    await writeFile(key, "-----BEGIN PUBLIC KEY-----\nnope\n-----END PUBLIC KEY-----\n");
    const files = [garbage, join(dir, "missing.json")];
    const runs = await Promise.all(
      files.map(async (file) => ({
        file,
        ...(await trellis(["receipts", "verify", file, "--public-key", key])),
      })),
    );
    for (const { file, code, out, err } of runs) {
      expect(code).not.toBe(0);
      expect(`${out}${err}`).toContain(
        file.endsWith("missing.json") ? "missing.json" : "garbage.json",
      );
      expect(err).not.toMatch(/\n\s+at /);
    }
  });
});

describe("Connect routes with garbage bodies", () => {
  let trellisServer: EmbeddedTrellis;
  const key = "trellis-entry-test-key-0123456789abcdef";
  beforeAll(async () => {
    trellisServer = await startEmbedded({
      services: allServices,
      port: 0,
      env: { TRELLIS_API_KEY: key },
      logger: createLogger({ service: "entry-test", level: "error", write: () => {} }),
    });
  });
  afterAll(() => trellisServer?.close({ graceMs: 100 }));

  const post = (method: string, contentType: string, body: string | Uint8Array) =>
    fetch(`${trellisServer.address.url}/${method}`, {
      method: "POST",
      headers: { "content-type": contentType, authorization: `Bearer ${key}` },
      body,
    });

  it.each([
    ["trellis.tasks.v1.TaskService/SubmitTask", "application/json", "{not json"],
    ["trellis.tasks.v1.TaskService/SubmitTask", "application/json", '{"input": 42}'],
    [
      "trellis.tasks.v1.TaskService/SubmitTask",
      "application/json",
      '{"busyPolicy": "BUSY_POLICY_SOMETIMES"}',
    ],
    ["trellis.chat.v1.ChatService/Send", "application/json", '{"sessionId": "\\ud800"}'],
  ])("%s answers %s garbage with a 4xx Connect error", async (method, contentType, body) => {
    const res = await post(method, contentType, body as string | Uint8Array);
    expect(res.status).toBeGreaterThanOrEqual(400);
    expect(res.status).toBeLessThan(500);
    const error = (await res.json()) as { code?: string; message?: string };
    expect(error.code).toBeTruthy();
    expect(res.headers.get("x-request-id")).toBeTruthy();
  });
});
