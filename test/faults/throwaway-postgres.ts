/**
 * A throwaway PostgreSQL cluster for the fault suites (initdb + pg_ctl, as
 * `.ci/run` starts one): its own data dir and loopback port, fsync off, so a
 * test may stop and restart it under load without touching the shared server.
 * Run as the `postgres` user through runuser when this process is root
 * (initdb refuses root). `find()` says why it cannot run when the binaries
 * are absent, so the suite can skip with that message.
 */
import { execFile } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { chown, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { restartablePort } from "@trellis/testkit";

const run = promisify(execFile);

function binDir(): string | undefined {
  for (const dir of ["/usr/local/bin", "/usr/bin"]) {
    if (existsSync(join(dir, "initdb")) && existsSync(join(dir, "pg_ctl"))) return dir;
  }
  const base = "/usr/lib/postgresql";
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const dir = join(base, v, "bin");
    if (existsSync(join(dir, "initdb"))) return dir;
  }
  return undefined;
}

/** Why a throwaway cluster cannot be made here, or undefined when it can. */
export function throwawayPostgresMissing(): string | undefined {
  return binDir() ? undefined : "initdb / pg_ctl not found (install Debian's postgresql)";
}

export class ThrowawayPostgres {
  private constructor(
    readonly bin: string,
    readonly dir: string,
    readonly port: number,
    readonly asRoot: boolean,
  ) {}

  static async start(): Promise<ThrowawayPostgres> {
    const bin = binDir();
    if (!bin) throw new Error(throwawayPostgresMissing());
    const dir = await mkdtemp(join(tmpdir(), "trellis-pg-"));
    const asRoot = process.getuid?.() === 0;
    if (asRoot) {
      const { stdout } = await run("id", ["-u", "postgres"]);
      const { stdout: gid } = await run("id", ["-g", "postgres"]);
      await chown(dir, Number(stdout.trim()), Number(gid.trim()));
    }
    const pg = new ThrowawayPostgres(bin, dir, await restartablePort(), asRoot);
    await pg.#as(join(bin, "initdb"), ["-D", join(dir, "data"), "-A", "trust", "-U", "postgres"]);
    await pg.start();
    return pg;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  async #as(cmd: string, args: string[]): Promise<void> {
    if (this.asRoot) await run("runuser", ["-u", "postgres", "--", cmd, ...args]);
    else await run(cmd, args);
  }

  /** Start (again) on the same port and data; resolves once it accepts connections. */
  async start(): Promise<void> {
    await this.#as(join(this.bin, "pg_ctl"), [
      "-D",
      join(this.dir, "data"),
      "-l",
      join(this.dir, "log"),
      "-w",
      "-o",
      `-c listen_addresses=127.0.0.1 -p ${this.port} -c fsync=off -c max_connections=300 -k ${this.dir}`,
      "start",
    ]);
  }

  /** Stop: `fast` (a clean restart) or `immediate` (like a crash: recovery at next start). */
  async stop(mode: "fast" | "immediate" = "fast"): Promise<void> {
    await this.#as(join(this.bin, "pg_ctl"), [
      "-D",
      join(this.dir, "data"),
      "-m",
      mode,
      "-w",
      "stop",
    ]);
  }

  async dispose(): Promise<void> {
    await this.stop("immediate").catch(() => {});
    await rm(this.dir, { recursive: true, force: true });
  }
}
