import { type Kysely, type Migration, sql } from "kysely";
import { assertSchemaName } from "../schema-name.js";

/**
 * A journal batch on PostgreSQL as ONE statement: `<schema>.journal_append`,
 * a PL/pgSQL function run in autocommit (its statement is its transaction).
 * It replaces BEGIN, the lock, the idempotency-key and stream-head reads,
 * the insert and COMMIT (up to six statements) by one, with the same rules:
 *
 * | rule | how |
 * |---|---|
 * | batches of every process take positions one after another | `pg_advisory_xact_lock` on the journal's key first (the key `appendInTransaction` takes too); released after the commit is visible |
 * | the reads see every batch committed before the lock | a VOLATILE function's statements each take a new snapshot (READ COMMITTED): they run after the lock was granted. (A single plain statement could not: its snapshot predates the lock it waits for.) |
 * | a key is written once; a stream moved past `expectedPosition` rejects that append alone | decided per append, in batch order, as the client-side path does: keys written earlier in the batch mirror that append; a stream written earlier in the batch has moved |
 * | positions are gapless | one insert of the written appends' entries, continuing the head read under the lock; any error fails the whole statement |
 *
 * One row per append comes back: `status` (`written`, `duplicate`,
 * `conflict`, `moved`), `first` (its first position; for a duplicate the
 * stored append's), `size` (a duplicate's stored size) and `head` (a
 * conflict's stream head).
 */
export function appendFunctionMigration(schema: string, channel: string): Migration {
  assertSchemaName(schema);
  // The schema passed assertSchemaName (so did the channel made of it): safe
  // to inline as identifier and literal.
  const lockName = `trellis.journal.${schema}`;
  return {
    async up(db: Kysely<unknown>) {
      await sql
        .raw(`
create or replace function ${schema}.journal_append(
  p_notify boolean,
  a_keys text[], a_expected bigint[], a_sizes int[],
  e_app int[], e_off int[], e_streams text[], e_kinds text[], e_bodies bytea[]
) returns table(append_no int, status text, first bigint, size int, head bigint)
language plpgsql volatile as $fn$
declare
  h bigint;
  n int := coalesce(cardinality(a_sizes), 0);
  firsts bigint[] := array_fill(null::bigint, array[greatest(n, 1)]);
  moved text[] := '{}';
  keys text[] := '{}';
  key_firsts bigint[] := '{}';
  key_sizes int[] := '{}';
  at int := 0;
  i int;
  k text;
  s text;
  found_first bigint;
  found_size int;
  current_head bigint;
  pos int;
begin
  perform pg_advisory_xact_lock(hashtextextended('${lockName}', 0));
  if p_notify then perform pg_notify('${channel}', ''); end if;
  select coalesce(max(j.position), 0) into h from ${schema}.journal j;
  for i in 1 .. n loop
    k := a_keys[i];
    if k is not null then
      pos := array_position(keys, k);
      if pos is not null then
        return query select i, 'duplicate'::text, key_firsts[pos], key_sizes[pos], null::bigint;
        at := at + a_sizes[i];
        continue;
      end if;
      select j.position, j.append_size into found_first, found_size
        from ${schema}.journal j where j.idempotency_key = k;
      if found then
        return query select i, 'duplicate'::text, found_first, found_size, null::bigint;
        at := at + a_sizes[i];
        continue;
      end if;
    end if;
    if a_expected[i] is not null then
      s := e_streams[at + 1];
      if s = any(moved) then
        return query select i, 'moved'::text, null::bigint, null::int, null::bigint;
        at := at + a_sizes[i];
        continue;
      end if;
      select coalesce(max(j.position), 0) into current_head
        from ${schema}.journal j where j.stream = s;
      if current_head <> a_expected[i] then
        return query select i, 'conflict'::text, null::bigint, null::int, current_head;
        at := at + a_sizes[i];
        continue;
      end if;
    end if;
    firsts[i] := h + 1;
    if k is not null then
      keys := keys || k;
      key_firsts := key_firsts || (h + 1);
      key_sizes := key_sizes || a_sizes[i];
    end if;
    moved := moved || e_streams[at + 1 : at + a_sizes[i]];
    return query select i, 'written'::text, h + 1, a_sizes[i], null::bigint;
    h := h + a_sizes[i];
    at := at + a_sizes[i];
  end loop;
  insert into ${schema}.journal (position, stream, kind, body, idempotency_key, append_size)
  select firsts[e_app[g]] + e_off[g], e_streams[g], e_kinds[g], e_bodies[g],
         case when e_off[g] = 0 then a_keys[e_app[g]] end,
         case when e_off[g] = 0 and a_keys[e_app[g]] is not null then a_sizes[e_app[g]] end
  from generate_series(1, coalesce(cardinality(e_streams), 0)) g
  where firsts[e_app[g]] is not null;
end
$fn$`)
        .execute(db);
    },
    async down(db: Kysely<unknown>) {
      await sql
        .raw(
          `drop function if exists ${schema}.journal_append(boolean, text[], bigint[], int[], int[], int[], text[], text[], bytea[])`,
        )
        .execute(db);
    },
  };
}

/** One append as the function takes it. */
export interface FunctionAppend {
  entries: readonly { stream: string; kind: string; body: Uint8Array }[];
  key: string | undefined;
  expected: bigint | undefined;
}

/** One append's answer from the function (see `journalAppendFunctionMigration`). */
export type FunctionResult =
  | { status: "written"; first: bigint }
  | { status: "duplicate"; first: bigint; size: number }
  | { status: "conflict"; head: bigint }
  | { status: "moved" };

/** Runs one batch through `<schema>.journal_append`; one answer per append, in batch order. */
export async function appendByFunction(
  db: Kysely<unknown>,
  schema: string,
  notify: boolean,
  batch: readonly FunctionAppend[],
): Promise<FunctionResult[]> {
  const keys: (string | null)[] = [];
  const expected: (string | null)[] = [];
  const sizes: number[] = [];
  const app: number[] = [];
  const off: number[] = [];
  const streams: string[] = [];
  const kinds: string[] = [];
  const bodies: Uint8Array[] = [];
  batch.forEach((pending, i) => {
    keys.push(pending.key ?? null);
    expected.push(pending.expected === undefined ? null : String(pending.expected));
    sizes.push(pending.entries.length);
    pending.entries.forEach((entry, at) => {
      app.push(i + 1);
      off.push(at);
      streams.push(entry.stream);
      kinds.push(entry.kind);
      bodies.push(entry.body);
    });
  });
  const fn = sql.id(schema, "journal_append");
  const { rows } = await sql<{
    append_no: number;
    status: string;
    first: string | bigint | null;
    size: number | null;
    head: string | bigint | null;
  }>`select append_no, status, first, size, head from ${fn}(
      ${notify}, cast(${keys} as text[]), cast(${expected} as bigint[]), cast(${sizes} as int[]),
      cast(${app} as int[]), cast(${off} as int[]), cast(${streams} as text[]),
      cast(${kinds} as text[]), cast(${bodies} as bytea[]))`.execute(db);
  const results: (FunctionResult | undefined)[] = new Array(batch.length);
  for (const row of rows) {
    const at = Number(row.append_no) - 1;
    switch (row.status) {
      case "written":
        results[at] = { status: "written", first: BigInt(row.first as string) };
        break;
      case "duplicate":
        results[at] = {
          status: "duplicate",
          first: BigInt(row.first as string),
          size: Number(row.size),
        };
        break;
      case "conflict":
        results[at] = { status: "conflict", head: BigInt(row.head as string) };
        break;
      default:
        results[at] = { status: "moved" };
    }
  }
  return results.map((result, i) => {
    if (result === undefined) throw new Error(`journal_append answered nothing for append ${i}`);
    return result;
  });
}
