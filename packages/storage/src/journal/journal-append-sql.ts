import { type Kysely, type Migration, type RawBuilder, sql } from "kysely";
import { outboxCounterTuple, outboxRowTuple } from "../outbox/outbox.js";
import type { NewOutboxRow, OutboxSequenceRow } from "../outbox/outbox-schema.js";
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
  /** Its events' outbox rows and counters (`AppendOptions.events`), written only if it is. */
  events?: { rows: readonly NewOutboxRow[]; counters: readonly OutboxSequenceRow[] } | undefined;
}

/** One append's answer from the function (see `journalAppendFunctionMigration`). */
export type FunctionResult =
  | { status: "written"; first: bigint }
  | { status: "duplicate"; first: bigint; size: number }
  | { status: "conflict"; head: bigint }
  | { status: "moved" };

/**
 * Runs one batch through `<schema>.journal_append`; one answer per append, in
 * batch order. With `outboxSchema`, the appends' events go to that outbox in
 * the same statement, for the appends the function wrote only (data-modifying
 * CTEs joined to its answers; a resource's counter from its last written
 * append); `inserted` pairs their ids with the positions they got.
 */
export async function appendByFunction(
  db: Kysely<unknown>,
  schema: string,
  notify: boolean,
  batch: readonly FunctionAppend[],
  outboxSchema?: string,
): Promise<{ results: FunctionResult[]; inserted: { id: string; position: bigint }[] }> {
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
  const call = sql`select append_no, status, first, size, head from ${fn}(
      ${notify}, cast(${keys} as text[]), cast(${expected} as bigint[]), cast(${sizes} as int[]),
      cast(${app} as int[]), cast(${off} as int[]), cast(${streams} as text[]),
      cast(${kinds} as text[]), cast(${bodies} as bytea[]))`;
  const events = outboxSchema === undefined ? undefined : eventValues(batch);
  const { rows } = await sql<{
    append_no: number | null;
    status: string | null;
    first: string | bigint | null;
    size: number | null;
    head: string | bigint | null;
    id?: string | null;
  }>`${
    events === undefined
      ? call
      : sql`with a as (${call}),
          ${withOutbox(outboxSchema as string, events.rows, events.counters)}
          select append_no, status, first, size, head, null as id from a
          union all
          select null, null, position, null, null, id from o`
  }`.execute(db);
  const results: (FunctionResult | undefined)[] = new Array(batch.length);
  const inserted: { id: string; position: bigint }[] = [];
  for (const row of rows) {
    if (typeof row.id === "string") {
      inserted.push({ id: row.id, position: BigInt(row.first as string) });
      continue;
    }
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
  return {
    inserted,
    results: results.map((result, i) => {
      if (result === undefined) throw new Error(`journal_append answered nothing for append ${i}`);
      return result;
    }),
  };
}

/** The batch's outbox rows and counters as VALUES lists, each tagged with its append's number. */
function eventValues(
  batch: readonly FunctionAppend[],
): { rows: RawBuilder<unknown>[]; counters: RawBuilder<unknown>[] } | undefined {
  const rows: RawBuilder<unknown>[] = [];
  const counters: RawBuilder<unknown>[] = [];
  batch.forEach((pending, i) => {
    const append = sql`${i + 1}::int`;
    for (const r of pending.events?.rows ?? []) {
      rows.push(outboxRowTuple(r, append, sql`${rows.length}::int`));
    }
    for (const c of pending.events?.counters ?? []) counters.push(outboxCounterTuple(c, append));
  });
  return rows.length === 0 ? undefined : { rows, counters };
}

/**
 * The CTEs `o_sequence` and `o` (`returning id, position`) writing the
 * outbox rows of the appends CTE `a` answered `written` (the function's
 * answers are computed once, before either insert reads them). A resource's
 * counter comes from its highest sequence among them, never lowering one.
 */
function withOutbox(
  schema: string,
  rows: readonly RawBuilder<unknown>[],
  counters: readonly RawBuilder<unknown>[],
): RawBuilder<unknown> {
  assertSchemaName(schema);
  return sql`o_sequence as (
      insert into ${sql.id(schema, "outbox_sequence")} as c (resource_object, resource_id,
        last_sequence, last_event_id, replaced_event_id)
      select distinct on (v.resource_object, v.resource_id)
        v.resource_object, v.resource_id, v.last_sequence, v.last_event_id, v.replaced_event_id
      from (values ${sql.join(counters)})
        as v(append_no, resource_object, resource_id, last_sequence, last_event_id, replaced_event_id)
      join a on a.append_no = v.append_no and a.status = 'written'
      order by v.resource_object, v.resource_id, v.last_sequence desc
      on conflict (resource_object, resource_id) do update set
        last_sequence = excluded.last_sequence,
        last_event_id = excluded.last_event_id,
        replaced_event_id = excluded.replaced_event_id
      where c.last_sequence < excluded.last_sequence),
    o as (
      insert into ${sql.id(schema, "outbox")} (id, workspace_id, session_id,
        resource_object, resource_id, sequence, kind, body, created_at)
      select v.id, v.workspace_id, v.session_id, v.resource_object, v.resource_id,
        v.sequence, v.kind, v.body, v.created_at
      from (values ${sql.join(rows)})
        as v(append_no, ordinal, id, workspace_id, session_id, resource_object, resource_id,
          sequence, kind, body, created_at)
      join a on a.append_no = v.append_no and a.status = 'written'
      order by v.ordinal
      returning id, position)`;
}
