/**
 * PostgreSQL backend CPU and client statements per journal append with
 * `expectedPosition` (the session owner's append), by the one-statement
 * `journal_append` function and by the transaction it replaced (the same
 * schema with the function dropped). Sequential appends on one stream, one
 * at a time (1 in flight); the backends' CPU is read from /proc (Linux, the
 * server on this machine), so it does not count this process's wait.
 *
 *   npx tsx bench/journal-append-cpu.ts   # TRELLIS_APPENDS (default 2000)
 */
import { readFile } from "node:fs/promises";
import { createDatabase, createJournal, journalMigrations, migrate } from "@trellis/storage";
import { createTestDatabase } from "@trellis/testkit";
import { sql } from "kysely";

const appends = Number(process.env.TRELLIS_APPENDS ?? 2000);
if (!Number.isInteger(appends) || appends < 1)
  throw new Error("TRELLIS_APPENDS: a whole number ≥ 1");
const ticks = 100; // USER_HZ

const testDb = await createTestDatabase("trellis_append_cpu");
const database = await createDatabase({ kind: "postgres", url: testDb.url });
try {
  const backendCpuMs = async (): Promise<number> => {
    const { rows } = await sql<{ pid: number }>`
      select pid from pg_stat_activity where datname = current_database()`.execute(database.kysely);
    let total = 0;
    for (const { pid } of rows) {
      const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += Number(fields[11] ?? 0) + Number(fields[12] ?? 0);
    }
    return (total * 1000) / ticks;
  };
  const statements = async (): Promise<number> => {
    const { rows } = await sql<{ n: string }>`
      select xact_commit + xact_rollback as n from pg_stat_database
      where datname = current_database()`.execute(database.kysely);
    return Number(rows[0]?.n ?? 0);
  };
  const run = async (schema: string, label: string) => {
    const journal = createJournal(database, { schema });
    const body = new TextEncoder().encode("x".repeat(200));
    let head = 0n;
    // Warm up (plans, connections), then measure.
    for (let i = 0; i < 50; i++) {
      const { positions } = await journal.append([{ stream: "s", kind: "k", body }], {
        expectedPosition: head,
      });
      head = positions[0] as bigint;
    }
    await sql`select pg_stat_force_next_flush()`.execute(database.kysely).catch(() => undefined);
    const cpu0 = await backendCpuMs();
    const tx0 = await statements();
    const started = process.cpuUsage();
    for (let i = 0; i < appends; i++) {
      const { positions } = await journal.append([{ stream: "s", kind: "k", body }], {
        expectedPosition: head,
      });
      head = positions[0] as bigint;
    }
    const client = process.cpuUsage(started);
    await sql`select pg_stat_force_next_flush()`.execute(database.kysely).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 600));
    const cpu1 = await backendCpuMs();
    const tx1 = await statements();
    await journal.close();
    console.log(
      `${label.padEnd(22)} backend CPU ${(((cpu1 - cpu0) * 1000) / appends).toFixed(1)} µs/append;` +
        ` client CPU ${((client.user + client.system) / appends).toFixed(1)} µs/append;` +
        ` transactions ${((tx1 - tx0) / appends).toFixed(2)}/append`,
    );
  };
  for (const round of [1, 2]) {
    const a = `fn${round}`;
    const b = `tx${round}`;
    await migrate(database, { schema: a, migrations: journalMigrations(a) });
    await migrate(database, { schema: b, migrations: journalMigrations(b) });
    await sql`drop function ${sql.id(b, "journal_append")}`.execute(database.kysely);
    await run(a, `function (round ${round})`);
    await run(b, `transaction (round ${round})`);
  }
} finally {
  await database.close();
  await testDb.drop();
}
