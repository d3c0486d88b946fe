/**
 * The contract of `appendInTransaction` (journal-unit.ts), run on PGlite and
 * PostgreSQL: entries commit or roll back with the caller's transaction,
 * positions stay gapless and in commit order beside `createJournal`'s group
 * commits (from another connection, too), and bad input is refused before
 * anything is written.
 */
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { openContractBackend } from "../contract/support.js";
import type { Database } from "../database.js";
import type { StorageContractTarget } from "../storage.contract.js";
import { createJournal, type JournalEntry } from "./journal.js";
import { readJournal } from "./journal-read.js";
import { journalMigrations } from "./journal-schema.js";
import { appendInTransaction } from "./journal-unit.js";

const entry = (stream: string, body: string): JournalEntry => ({
  stream,
  kind: "test.step",
  body: new TextEncoder().encode(body),
});
const text = (body: Uint8Array) => new TextDecoder().decode(body);

/** Registers the suite for one backend. */
export function describeJournalUnitContract(
  name: string,
  factory: () => Promise<StorageContractTarget>,
): void {
  describe(`journal appends in a caller's transaction: ${name}`, () => {
    const backend = openContractBackend(factory, { other: true });
    const freshSchema = () => backend.freshSchema("ju", journalMigrations);
    const options = (schema: string, on: Database) => ({
      schema,
      lock: on.kind === "postgres",
      notify: on.kind === "postgres",
    });

    it("commits with the caller's writes and leaves nothing (and no gap) when it rolls back", async () => {
      const schema = await freshSchema();
      const first = await backend.database.kysely
        .transaction()
        .execute((trx) =>
          appendInTransaction(
            trx,
            [entry("s1", "a"), entry("s1", "b")],
            options(schema, backend.database),
          ),
        );
      expect(first).toEqual([1n, 2n]);
      await expect(
        backend.database.kysely.transaction().execute(async (trx) => {
          await appendInTransaction(trx, [entry("s1", "lost")], options(schema, backend.database));
          throw new Error("the caller's write failed");
        }),
      ).rejects.toThrow("the caller's write failed");
      const next = await backend.database.kysely
        .transaction()
        .execute((trx) =>
          appendInTransaction(trx, [entry("s2", "c")], options(schema, backend.database)),
        );
      expect(next).toEqual([3n]);
      const stored = await readJournal(backend.other.kysely, schema, { limit: 100 });
      expect(stored.map((r) => [r.position, r.stream, text(r.body)])).toEqual([
        [1n, "s1", "a"],
        [2n, "s1", "b"],
        [3n, "s2", "c"],
      ]);
    });

    it("keeps positions gapless beside group commits from another connection", async () => {
      const schema = await freshSchema();
      const journal = createJournal(backend.other, { schema });
      try {
        const inTransaction = Array.from({ length: 20 }, (_, i) =>
          backend.database.kysely
            .transaction()
            .execute((trx) =>
              appendInTransaction(
                trx,
                [entry(`t${i}`, `t${i}.1`), entry(`t${i}`, `t${i}.2`)],
                options(schema, backend.database),
              ),
            ),
        );
        const grouped = Array.from({ length: 20 }, (_, i) =>
          journal.append([entry(`g${i}`, `g${i}.1`), entry(`g${i}`, `g${i}.2`)]),
        );
        const positions = [
          ...(await Promise.all(inTransaction)),
          ...(await Promise.all(grouped)).map((r) => r.positions),
        ];
        // Each append's entries are contiguous, and together they fill 1…80.
        for (const own of positions) expect(own[1]).toBe((own[0] as bigint) + 1n);
        const sorted = positions.flat().sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
        expect(sorted).toEqual(Array.from({ length: 80 }, (_, i) => BigInt(i + 1)));
        const stored = await readJournal(backend.other.kysely, schema, { limit: 1000 });
        expect(stored).toHaveLength(80);
        for (const record of stored) {
          expect(text(record.body).startsWith(`${record.stream}.`)).toBe(true);
        }
      } finally {
        await journal.close();
      }
    });

    it("refuses bad input before writing anything", async () => {
      const schema = await freshSchema();
      const refused = async (entries: JournalEntry[], reason: string) => {
        const error = await backend.database.kysely
          .transaction()
          .execute((trx) => appendInTransaction(trx, entries, options(schema, backend.database)))
          .then(
            () => undefined,
            (e: unknown) => e,
          );
        expect(isTrellisError(error) && error.reason).toBe(reason);
      };
      await refused([], "invalid_request");
      await refused([{ stream: "", kind: "k", body: new Uint8Array(1) }], "invalid_request");
      await refused(
        [{ stream: "s", kind: "k", body: new Uint8Array(1024 * 1024 + 1) }],
        "payload_too_large",
      );
      expect(await readJournal(backend.other.kysely, schema, { limit: 10 })).toEqual([]);
    });
  });
}
