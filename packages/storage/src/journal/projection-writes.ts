/**
 * Writes of a projection batch run as ONE statement: each write a
 * data-modifying CTE (`w0`, `w1`, …; PostgreSQL runs every one of them,
 * once, on one snapshot, and checks foreign keys at the statement's end).
 * The CTEs of a statement run in no set order, except that one a query
 * reads has run by the time the reading query is done — so writes that must
 * come first (a row leaving a partial unique index that another row of the
 * batch enters: an index is checked row by row) are read by the main query,
 * and the rest, which no one reads, run after it.
 */
import type { AliasedRawBuilder, QueryCreator } from "kysely";
import { sql } from "kysely";

/**
 * One write of a batch: an insert, update or delete built on the query
 * creator of the caller's schema, run as a data-modifying CTE.
 */
// biome-ignore lint/suspicious/noExplicitAny: the writes' tables are the caller's, not the journal's.
export type ProjectionWrite = (qc: QueryCreator<any>) => { toOperationNode(): unknown };

/**
 * Writes in two stages: every one of `first` has run when any of `rest`
 * runs. The statement's main query reads each of `first`, so each needs a
 * `returning` clause.
 */
export interface ProjectionStages {
  first: readonly ProjectionWrite[];
  rest: readonly ProjectionWrite[];
}

/**
 * The statement running `writes` as CTEs of `on` (a query creator, with
 * CTEs of its own if need be), whose main query selects `columns` and reads
 * each write of the first stage.
 */
export function writesStatement(
  // biome-ignore lint/suspicious/noExplicitAny: the writes' tables are the caller's.
  on: QueryCreator<any>,
  writes: readonly ProjectionWrite[] | ProjectionStages,
  columns: readonly AliasedRawBuilder<unknown, string>[],
): { execute(): Promise<unknown> } {
  const { first, rest } = "rest" in writes ? writes : { first: [], rest: writes };
  let query = on;
  [...first, ...rest].forEach((write, i) => {
    // biome-ignore lint/suspicious/noExplicitAny: a chain of CTEs of different shapes.
    query = query.with(`w${i}`, write as any);
  });
  return query.selectNoFrom([
    ...columns,
    ...first.map((_, i) => sql<number>`(select count(*) from ${sql.raw(`w${i}`)})`.as(`first${i}`)),
  ]);
}
