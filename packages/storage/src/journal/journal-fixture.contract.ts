/**
 * What the journal contract and the projector contract share, registered
 * inside a suite's `describe`: a backend (and a second connection, `other`)
 * with a fresh schema per test, journals and projectors closed after each
 * test, a projection table that records what a projector applied.
 */
import { sql, type Transaction } from "kysely";
import { openContractBackend } from "../contract/support.js";
import type { StorageContractTarget } from "../storage.contract.js";
import { createJournal, type Journal, type JournalEntry, type JournalOptions } from "./journal.js";
import { type JournalRecord, readJournal } from "./journal-read.js";
import { journalMigrations } from "./journal-schema.js";
import type { ProjectionWrite } from "./projection-writes.js";
import { createProjector, type Projector } from "./projector.js";

const text = new TextEncoder();

/** An entry of `stream` whose body names it. */
export const entry = (
  stream: string,
  kind = "test.entry",
  body = `${stream}:${kind}`,
): JournalEntry => ({
  stream,
  kind,
  body: text.encode(body),
});

/** A record's body as text. */
export const decode = (record: JournalRecord): string => new TextDecoder().decode(record.body);

/** The shared set-up of the journal and projector contracts (call inside `describe`). */
export function journalFixture(factory: () => Promise<StorageContractTarget>) {
  const journals: Journal[] = [];
  const projectors: Projector[] = [];
  const backend = openContractBackend(factory, {
    other: true,
    async release() {
      await Promise.all(projectors.map((p) => p.stop()));
      await Promise.all(journals.map((j) => j.close()));
    },
  });
  const freshSchema = () => backend.freshSchema("jr", journalMigrations);
  const open = (schema: string, options: Partial<JournalOptions> = {}, on = backend.database) => {
    const journal = createJournal(on, { schema, ...options });
    journals.push(journal);
    return journal;
  };
  const all = (schema: string, on = backend.other) =>
    readJournal(on.kysely, schema, { limit: 100_000 });
  /** How many transactions wrote the journal's rows (their distinct `xmin`). */
  const transactions = async (schema: string): Promise<number> => {
    const result = await sql<{ n: bigint }>`
      select count(distinct xmin::text) as n from ${sql.id(schema, "journal")}`.execute(
      backend.other.kysely,
    );
    return Number(result.rows[0]?.n ?? 0n);
  };
  /** A projection table and a `project` that records each entry in it. */
  const projection = async (schema: string) => {
    await sql`create table ${sql.id(schema, "applied")} (position bigint not null, stream text not null)`.execute(
      backend.database.kysely,
    );
    const apply = async (batch: readonly JournalRecord[], trx: Transaction<unknown>) => {
      await sql`insert into ${sql.id(schema, "applied")} (position, stream) values ${sql.join(
        batch.map((r) => sql`(${r.position}, ${r.stream})`),
      )}`.execute(trx);
    };
    const applied = async (): Promise<bigint[]> => {
      const rows = await sql<{ position: bigint }>`
        select position from ${sql.id(schema, "applied")} order by position`.execute(
        backend.other.kysely,
      );
      return rows.rows.map((r) => BigInt(r.position));
    };
    /** `apply` as the projector's `writes`: one insert, run in the batch's one statement. */
    const writes = (batch: readonly JournalRecord[]): ProjectionWrite[] => [
      (qc) =>
        qc
          .insertInto("applied")
          .values(batch.map((r) => ({ position: r.position, stream: r.stream }))),
    ];
    return { apply, applied, writes };
  };
  const project = async (
    schema: string,
    options: Partial<Parameters<typeof createProjector>[0]> & {
      project: Parameters<typeof createProjector>[0]["project"];
    },
  ) => {
    const projector = await createProjector({
      database: backend.database,
      schema,
      name: "test",
      pollIntervalMs: 50,
      retryMs: 10,
      maxRetryMs: 50,
      onError: () => {},
      ...options,
    });
    projectors.push(projector);
    return projector;
  };
  const range = (n: number) => Array.from({ length: n }, (_, i) => BigInt(i + 1));
  return { backend, freshSchema, open, all, transactions, projection, project, range };
}
