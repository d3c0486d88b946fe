// The polyglot clients against a real Trellis: embedded mode started the way
// `npm start` starts it (`trellis dev` on a free port, its own data directory,
// the generated admin key file), then the Python example — and the Go one when
// a Go toolchain is installed — run a chat turn with an approval over plain
// gRPC with the committed stubs. Also: the committed stubs are what
// `npm run generate:clients` makes from proto/ today.
import { spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort, type ProcessRun, runProcess } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTrellisDev, type TrellisDev } from "../support/trellis-dev.js";

const root = fileURLToPath(new URL("../..", import.meta.url));
const buf = join(root, "node_modules/.bin/buf");

// Debian's python3-grpcio / python3-protobuf live in the system interpreter's
// dist-packages; a pyenv or venv python3 earlier on PATH may not see them.
function findPython(): string | undefined {
  for (const candidate of ["/usr/bin/python3", "python3"]) {
    const probe = spawnSync(candidate, ["-c", "import grpc, google.protobuf"], {
      encoding: "utf8",
    });
    if (probe.status === 0) return candidate;
  }
  return undefined;
}
const python = findPython();
const has = (tool: string) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
const goPath = "/usr/share/gocode";
const haveGo =
  has("go") &&
  existsSync(join(goPath, "src/google.golang.org/grpc")) &&
  existsSync(join(goPath, "src/google.golang.org/protobuf"));

if (!python) {
  console.warn(
    "clients: no python3 with grpcio and protobuf (apt-get install python3-grpcio python3-protobuf); the Python example is skipped",
  );
}
if (!haveGo) {
  console.warn(
    "clients: no Go toolchain with Debian's grpc and protobuf sources (apt-get install golang-go golang-google-grpc-dev golang-google-protobuf-dev golang-github-golang-protobuf-1-5-dev); the Go example is skipped",
  );
}

function run(command: string, args: string[], env: Record<string, string> = {}) {
  return runProcess(command, args, {
    cwd: root,
    env: { ...process.env, ...env },
    timeoutMs: 90_000,
  });
}

describe("client examples against `trellis dev`", () => {
  let server: TrellisDev;
  let url: string;
  let keyFile: string;
  const serverLog = () => server?.output() ?? "";

  beforeAll(async () => {
    // No configured key: it writes the admin key file the examples read.
    server = await startTrellisDev({ TRELLIS_API_KEY: "" }, (dataDir) =>
      existsSync(join(dataDir, "data", "admin-api-key")),
    );
    url = server.url;
    keyFile = join(server.dataDir, "data", "admin-api-key");
  }, 90_000);

  afterAll(async () => {
    await server?.stop();
  }, 30_000);

  function expectApprovalCycle(result: ProcessRun) {
    expect(result.code, `${result.out}\n${result.err}\n${serverLog().slice(-2000)}`).toBe(0);
    const summary = JSON.parse(result.out.trim().split("\n").at(-1) as string);
    expect(summary.agent_id).toMatch(/^agent_/);
    // The id as the graph's author wrote it; Deliver finds the one turn waiting on it.
    expect(summary.signal_id).toBe("approval");
    expect(summary.pending).toEqual(["May I send the email?"]);
    expect(summary.outcome).toBe("completed");
    // The resumed turn's outcome carries the post-resume reply only.
    expect(summary.replies).toEqual(["Email sent."]);
    expect(result.out).toContain(`agent: ${summary.agent_id}`);
    expect(result.out).toContain(`send: suspended task=${summary.task_id}`);
    expect(result.out).toContain("subscribe: subscribed");
    expect(result.out).toContain(`outcome: completed task=${summary.task_id}`);
    return summary;
  }

  it.skipIf(!python)(
    "Python: suspend, approve over SignalService/Deliver, resumed outcome",
    async () => {
      const result = await run(
        python as string,
        ["clients/python/examples/chat_approval.py", "--json"],
        {
          TRELLIS_URL: url,
          TRELLIS_API_KEY_FILE: keyFile,
          TRELLIS_API_KEY: "",
        },
      );
      const summary = expectApprovalCycle(result);
      expect(summary.delivered_task_id).toBe(summary.task_id);
      expect(summary.resumed_task_id).toBe(summary.task_id);
      expect(summary.history).toEqual([
        { role: "user", text: "email Bob" },
        { role: "assistant", text: "May I send the email?" },
        { role: "assistant", text: "Email sent." },
      ]);
    },
  );

  it.skipIf(!python)(
    "Python: a bad key is UNAUTHENTICATED with Trellis' ErrorDetail, exit 1",
    async () => {
      const result = await run(python as string, ["clients/python/examples/chat_approval.py"], {
        TRELLIS_URL: url,
        TRELLIS_API_KEY: "not-a-key",
      });
      expect(result.code).toBe(1);
      expect(result.err).toMatch(/RPC failed: UNAUTHENTICATED: /);
      expect(result.err).toMatch(/reason=\S+ domain=\S+/);
      expect(result.err).not.toMatch(/Traceback/);
    },
  );

  it.skipIf(!python)("Python: an unreachable server is one clear line", async () => {
    const port = await freePort();
    const result = await run(
      python as string,
      ["clients/python/examples/chat_approval.py", "--url", `http://127.0.0.1:${port}`],
      { TRELLIS_API_KEY: "x", TRELLIS_CONNECT_TIMEOUT: "2" },
    );
    expect(result.code).toBe(1);
    expect(result.err.trim()).toBe(
      `chat_approval: cannot reach Trellis at http://127.0.0.1:${port}`,
    );
  });

  it.skipIf(!haveGo)(
    "Go: the same cycle with the Go stubs",
    async () => {
      const gopath = mkdtempSync(join(tmpdir(), "trellis-gopath-"));
      try {
        mkdirSync(join(gopath, "src/trellis.dev/clients"), { recursive: true });
        symlinkSync(join(root, "clients/go"), join(gopath, "src/trellis.dev/clients/go"));
        const binary = join(gopath, "chat_approval");
        const env = {
          GO111MODULE: "off",
          GOPATH: `${gopath}:${goPath}`,
          // Shared with scripts/generate-clients.sh: grpc compiles once, not per run.
          GOCACHE: join(root, "node_modules/.cache/trellis-clients/go-build"),
          GOFLAGS: "",
        };
        const build = await run(
          "go",
          ["build", "-o", binary, "trellis.dev/clients/go/examples/chat_approval"],
          env,
        );
        expect(build.code, build.err).toBe(0);
        const result = await run(binary, ["-json"], {
          TRELLIS_URL: url,
          TRELLIS_API_KEY_FILE: keyFile,
        });
        const summary = expectApprovalCycle(result);
        expect(summary.history).toEqual([
          "user: email Bob",
          "assistant: May I send the email?",
          "assistant: Email sent.",
        ]);
      } finally {
        rmSync(gopath, { recursive: true, force: true });
      }
    },
    120_000,
  );
});

// The committed stubs are current: generate into a scratch directory and compare.
function filesUnder(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (current: string) => {
    for (const entry of readdirSync(current, { withFileTypes: true })) {
      const path = join(current, entry.name);
      if (entry.isDirectory()) walk(path);
      else out.set(relative(dir, path), readFileSync(path, "utf8"));
    }
  };
  if (existsSync(dir)) walk(dir);
  return out;
}

const stubs = [
  {
    language: "Python",
    template: "buf.gen.python.yaml",
    dir: "clients/python/gen",
    ready: has("protoc") && has("grpc_python_plugin"),
  },
  {
    language: "Go",
    template: "buf.gen.go.yaml",
    dir: "clients/go/gen",
    ready: has("protoc-gen-go-grpc") && (has("protoc-gen-go") || haveGo),
  },
];
describe("generated client stubs", () => {
  it.each(stubs)(
    "$language stubs are current (npm run generate:clients)",
    ({ template, dir, ready, language }) => {
      if (!ready) {
        console.warn(
          `clients: the ${language} protoc plugins are not installed; staleness not checked`,
        );
        return;
      }
      const scratch = mkdtempSync(join(tmpdir(), "trellis-stubs-"));
      try {
        // generate-clients.sh builds protoc-gen-go when it is not on PATH.
        const prepared = spawnSync("bash", ["scripts/generate-clients.sh", "--tools-only"], {
          cwd: root,
          encoding: "utf8",
        });
        expect(prepared.status, prepared.stderr).toBe(0);
        const pathWithTools = `${join(root, "node_modules/.cache/trellis-clients/bin")}:${process.env.PATH}`;
        const generated = spawnSync(buf, ["generate", "--template", template, "-o", scratch], {
          cwd: root,
          encoding: "utf8",
          env: { ...process.env, PATH: pathWithTools },
        });
        expect(generated.status, generated.stderr).toBe(0);
        const fresh = filesUnder(join(scratch, dir));
        const committed = filesUnder(join(root, dir));
        expect(fresh.size).toBeGreaterThan(0);
        expect([...committed.keys()].sort(), "run npm run generate:clients").toEqual(
          [...fresh.keys()].sort(),
        );
        for (const [file, text] of fresh)
          expect(
            committed.get(file) === text,
            `${dir}/${file} is stale: run npm run generate:clients`,
          ).toBe(true);
      } finally {
        rmSync(scratch, { recursive: true, force: true });
      }
    },
  );
});
