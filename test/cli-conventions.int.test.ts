// The CLI's one convention, on every command and subcommand: --help prints
// the usage and exits 0 with no side effects (no data directory, no database,
// no server); an unknown option exits 2 with the usage; a busy port makes
// `trellis dev` exit non-zero at once.
import { once } from "node:events";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runProcess, testDatabaseServerUrl } from "@trellis/testkit";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("..", import.meta.url));

interface Run {
  code: number | null;
  out: string;
  err: string;
  ms: number;
}

/** Run the CLI as a user would (bin/trellis.js) in `cwd`. */
async function trellis(args: string[], cwd: string, env: Record<string, string>): Promise<Run> {
  const started = performance.now();
  const run = await runProcess(process.execPath, [join(root, "bin/trellis.js"), ...args], {
    cwd,
    env: { ...process.env, ...env },
    timeoutMs: 60_000,
  });
  return { ...run, ms: performance.now() - started };
}

/** `work` over `items`, at most `limit` at a time (the machine is shared). */
async function pooled<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>) {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await work(items[i] as T);
      }
    }),
  );
  return results;
}

// Every command and subcommand, with the first line its usage starts with.
const commands: [string[], string][] = [
  [[], "Usage: trellis <command>"],
  [["dev"], "Usage: trellis dev"],
  [["mesh"], "Usage: trellis mesh"],
  [["health"], "Usage: trellis health"],
  [["receipts"], "Usage: trellis receipts verify"],
  [["receipts", "verify"], "Usage: trellis receipts verify"],
  [["receipts", "verify", "rcpt_x"], "Usage: trellis receipts verify"],
  [["serve"], "Usage: trellis serve"],
  [["serve", "gateway"], "Usage: trellis serve"],
  [["serve", "adapter-worker"], "Usage: trellis serve"],
  [["migrate"], "Usage: trellis migrate"],
  [["migrate", "--service", "tasks"], "Usage: trellis migrate"],
  [["keys"], "Usage: trellis keys"],
  [["keys", "create"], "Usage: trellis keys"],
  [["keys", "list"], "Usage: trellis keys"],
  [["keys", "revoke", "key_x"], "Usage: trellis keys"],
  [["adapters"], "Usage: trellis adapters conformance"],
  [["adapters", "conformance"], "Usage: trellis adapters conformance"],
  [["adapters", "conformance", "--backend", "b"], "Usage: trellis adapters conformance"],
];

describe("trellis CLI conventions", () => {
  let cwd: string;
  // A database that does not exist: a command that tried to use it would fail
  // (or, worse, create it); help must not get that far.
  const missingDb = `trellis_cli_help_${process.pid}_${Date.now()}`;
  const dbUrl = new URL(testDatabaseServerUrl);
  dbUrl.pathname = `/${missingDb}`;
  let env: Record<string, string>;

  beforeAll(async () => {
    cwd = await mkdtemp(join(tmpdir(), "trellis-cli-help-"));
    env = {
      DATABASE_URL: dbUrl.toString(),
      TRELLIS_DATA_DIR: join(cwd, "data"),
      // A port nothing listens on: a started server would show up there.
      TRELLIS_PORT: "9",
      TRELLIS_SERVICE: "",
    };
  });
  afterAll(async () => {
    await rm(cwd, { recursive: true, force: true });
  });

  it("answers --help and -h on every command with its usage, exit 0 and no side effects", async () => {
    const cases = commands.flatMap(([args, usage]) =>
      ["--help", "-h"].map((flag) => ({ args: [...args, flag], usage })),
    );
    const runs = await pooled(cases, 4, async ({ args, usage }) => ({
      args,
      usage,
      run: await trellis(args, cwd, env),
    }));
    for (const { args, usage, run } of runs) {
      expect({ args, code: run.code, err: run.err }).toEqual({ args, code: 0, err: "" });
      expect(run.out.startsWith(usage), `${args.join(" ")}: ${run.out.slice(0, 80)}`).toBe(true);
    }
    // Nothing made in the working directory or the data directory…
    expect(await readdir(cwd)).toEqual([]);
    // …and no database created.
    const client = new pg.Client({ connectionString: testDatabaseServerUrl });
    await client.connect();
    try {
      const { rowCount } = await client.query("select 1 from pg_database where datname = $1", [
        missingDb,
      ]);
      expect(rowCount).toBe(0);
    } finally {
      await client.end();
    }
  }, 240_000);

  it("refuses an unknown option on every command with exit 2 and the usage on stderr", async () => {
    // One case per command module (each run loads its module: slow).
    const modules = ["dev", "mesh", "health", "receipts verify", "serve", "migrate", "keys create"];
    const cases = commands.filter(([args]) => modules.includes(args.join(" ")));
    expect(cases).toHaveLength(modules.length);
    const runs = await pooled(cases, 3, async ([args, usage]) => ({
      args,
      usage,
      run: await trellis([...args, "--no-such-option"], cwd, env),
    }));
    for (const { args, usage, run } of runs) {
      expect({ args, code: run.code }).toEqual({ args, code: 2 });
      expect(run.err).toContain("--no-such-option");
      expect(run.err).toContain(usage);
      expect(run.err).not.toMatch(/\n\s+at /);
      expect(run.out).toBe("");
    }
    expect(await readdir(cwd)).toEqual([]);
  }, 240_000);

  describe("a busy port", () => {
    let busy: Server;
    let port: number;
    beforeAll(async () => {
      busy = createServer();
      busy.listen(0, "127.0.0.1");
      await once(busy, "listening");
      port = (busy.address() as { port: number }).port;
    });
    afterAll(() => new Promise<void>((done) => busy.close(() => done())));

    it("makes trellis dev exit non-zero within 5 s, naming the port and TRELLIS_PORT", async () => {
      const run = await trellis(["dev"], cwd, { ...env, TRELLIS_PORT: String(port) });
      expect(run.code).toBe(1);
      expect(run.ms).toBeLessThan(5000);
      expect(run.err).toContain(`port ${port}`);
      expect(run.err).toContain("TRELLIS_PORT");
      expect(await readdir(cwd)).toEqual([]);
    }, 30_000);

    it("makes trellis mesh exit non-zero before it starts anything", async () => {
      const run = await trellis(["mesh"], cwd, { ...env, TRELLIS_PORT: String(port) });
      expect(run.code).toBe(1);
      expect(run.err).toContain(`port ${port}`);
      expect(run.err).toContain("TRELLIS_PORT");
    }, 60_000);
  });

  it("fails at once on a database that does not exist, saying what to do", async () => {
    const [migrate, mesh] = await Promise.all([
      trellis(["migrate"], cwd, env),
      trellis(["mesh"], cwd, { ...env, TRELLIS_PORT: "0" }),
    ]);
    expect(migrate.code).toBe(1);
    expect(migrate.err).toContain(`database "${missingDb}" does not exist`);
    expect(migrate.err).toContain("DATABASE_URL");
    expect(migrate.ms).toBeLessThan(30_000);
    expect(mesh.code).toBe(1);
    expect(mesh.err).toContain(`cannot use database ${missingDb}`);
    expect(mesh.err).toContain("createdb");
    expect(await readdir(cwd)).toEqual([]);
  }, 90_000);

  it("refuses trellis mesh without DATABASE_URL instead of choosing a database", async () => {
    const run = await trellis(["mesh"], cwd, { ...env, DATABASE_URL: "" });
    expect(run.code).toBe(2);
    expect(run.err).toMatch(/^trellis mesh: DATABASE_URL is required/);
    expect(await readdir(cwd)).toEqual([]);
  }, 60_000);
});
