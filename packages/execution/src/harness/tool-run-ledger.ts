/**
 * The tool-run ledger: what makes an approved tool call run exactly once.
 *
 * A suspended turn's checkpoint is immutable data the tasks service hands
 * back on resume — and it may hand the same checkpoint back more than once
 * (a signal delivered twice, a worker that died after running the tool but
 * before the turn's result was committed, a redelivered work item). So the
 * checkpoint alone cannot say "already ran". The ledger can: before an
 * approved call runs, the harness claims its key (task id + tool call id);
 * only the first claim runs the tool, and its outcome is recorded under the
 * key. A later resume of the same checkpoint finds the outcome and feeds it
 * back to the model without running anything.
 *
 * A claim whose run never finished (the process died mid-call) stays
 * "running" forever: the harness then fails the turn (`tool_outcome_unknown`)
 * rather than run a side effect twice — at most once, never a guess.
 */
import type { Database } from "@trellis/storage";
import { migrate } from "@trellis/storage";
import { type Generated, type Kysely, type Migration, sql } from "kysely";

/** What a finished run produced. */
export interface ToolRunOutcome {
  /** "ok", or "error" when the tool threw (it ran all the same). */
  status: "ok" | "error";
  /** The tool message's content. */
  output: string;
}

/** The answer to a claim. */
export type ToolRunClaim =
  /** This caller must run the tool, then {@link ToolRunLedger.finish}. */
  | { state: "acquired" }
  /** Another caller claimed it and has not finished (or died). */
  | { state: "running" }
  /** It ran; this is what it produced. */
  | { state: "done"; outcome: ToolRunOutcome };

/** Where tool runs are claimed and recorded. */
export interface ToolRunLedger {
  /** Atomically claims `key`: exactly one caller ever gets "acquired". */
  claim(key: string): Promise<ToolRunClaim>;
  /** Records the outcome of the run this caller acquired. */
  finish(key: string, outcome: ToolRunOutcome): Promise<void>;
}

/**
 * A process-local ledger: exact within one process (embedded mode, tests),
 * forgotten on restart. Distributed deployments use {@link PostgresToolRunLedger}.
 */
export class InMemoryToolRunLedger implements ToolRunLedger {
  readonly #runs = new Map<string, ToolRunOutcome | "running">();

  async claim(key: string): Promise<ToolRunClaim> {
    const run = this.#runs.get(key);
    if (run === undefined) {
      this.#runs.set(key, "running");
      return { state: "acquired" };
    }
    return run === "running" ? { state: "running" } : { state: "done", outcome: run };
  }

  async finish(key: string, outcome: ToolRunOutcome): Promise<void> {
    this.#runs.set(key, outcome);
  }
}

interface ToolRunTable {
  key: string;
  status: string | null;
  output: string | null;
  claimed_at: Generated<Date>;
  finished_at: Date | null;
}

interface LedgerDatabase {
  tool_runs: ToolRunTable;
}

const createToolRuns: Migration = {
  async up(db: Kysely<unknown>) {
    await db.schema
      .createTable("tool_runs")
      .addColumn("key", "text", (c) => c.primaryKey())
      .addColumn("status", "text")
      .addColumn("output", "text")
      .addColumn("claimed_at", "timestamptz", (c) => c.notNull().defaultTo(sql`now()`))
      .addColumn("finished_at", "timestamptz")
      .execute();
  },
};

/** The ledger's migrations (its own schema, so they never mix with another service's). */
export const toolRunLedgerMigrations: Record<string, Migration> = {
  "2026_12_01_create_tool_runs": createToolRuns,
};

/** Options of {@link PostgresToolRunLedger.open}. */
export interface PostgresToolRunLedgerOptions {
  /** Schema of the ledger's table (default `harness`); created and migrated on open. */
  schema?: string;
}

/**
 * The ledger in PostgreSQL (or PGlite): the claim is an insert on the
 * primary key, so exactly one claimant wins across every process sharing the
 * database.
 */
export class PostgresToolRunLedger implements ToolRunLedger {
  readonly #db: Kysely<LedgerDatabase>;

  private constructor(db: Kysely<LedgerDatabase>) {
    this.#db = db;
  }

  /** Migrates the ledger's schema and returns the ledger. */
  static async open(
    database: Database,
    options: PostgresToolRunLedgerOptions = {},
  ): Promise<PostgresToolRunLedger> {
    const schema = options.schema ?? "harness";
    await migrate(database, { schema, migrations: toolRunLedgerMigrations });
    return new PostgresToolRunLedger(
      (database.kysely as unknown as Kysely<LedgerDatabase>).withSchema(schema),
    );
  }

  async claim(key: string): Promise<ToolRunClaim> {
    const inserted = await this.#db
      .insertInto("tool_runs")
      .values({ key })
      .onConflict((oc) => oc.column("key").doNothing())
      .returning("key")
      .executeTakeFirst();
    if (inserted) return { state: "acquired" };
    const row = await this.#db
      .selectFrom("tool_runs")
      .select(["status", "output"])
      .where("key", "=", key)
      .executeTakeFirstOrThrow();
    if (row.status !== "ok" && row.status !== "error") return { state: "running" };
    return { state: "done", outcome: { status: row.status, output: row.output ?? "" } };
  }

  async finish(key: string, outcome: ToolRunOutcome): Promise<void> {
    await this.#db
      .updateTable("tool_runs")
      .set({ status: outcome.status, output: outcome.output, finished_at: sql<Date>`now()` })
      .where("key", "=", key)
      .where("finished_at", "is", null)
      .execute();
  }
}
