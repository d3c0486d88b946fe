/**
 * Fixed-window counters in the database, shared by every gateway replica.
 *
 * One statement decides each request, whatever the number of its counters
 * ({@link QuotaCounters.takeAll}): per counter, an upsert that starts a new
 * window (when the row's window is over) or adds to the current one only
 * while the sum stays within the limit; each counter's upsert runs only when
 * the one before it granted, and the same statement reads the refused
 * counter's current state. PostgreSQL locks the row for the upsert, so two
 * replicas racing for the last unit cannot both get it. Windows are cut from
 * the database's clock, so replicas with skewed clocks still agree on them.
 */
import type { Database } from "@trellis/storage";
import { type Kysely, sql } from "kysely";

/** What one attempt to use a counter found. */
export interface CounterResult {
  /** Whether the units were granted (and counted). */
  allowed: boolean;
  /** Units used in the current window (after this one, when allowed). */
  used: number;
  /** When the current window ends. */
  resetAt: Date;
  /** When the window the units were counted in started (for {@link QuotaCounters.refund}). */
  windowStart: Date;
}

/** One counter of a {@link QuotaCounters.takeAll}. */
export interface CounterTake {
  bucket: string;
  periodMs: number;
  limit: number;
  /** Units (default 1). */
  cost?: number;
}

/** Units of one bucket granted in the window starting at `windowStart` (see {@link QuotaCounters.addAll}). */
export interface CounterAdd {
  bucket: string;
  windowStart: Date;
  /** When that window ends. */
  resetAt: Date;
  cost: number;
}

/** The port. */
export interface QuotaCounters {
  /** Take `cost` units of `bucket` (window `periodMs`) unless that would pass `limit`. */
  take(bucket: string, periodMs: number, limit: number, cost?: number): Promise<CounterResult>;
  /**
   * Take several counters in order, in one statement, as consecutive
   * {@link take}s that stop at the first refusal would: the results of the
   * granted counters, then the refused one's (the ones after it are neither
   * counted nor returned). Buckets must differ.
   */
  takeAll(takes: readonly CounterTake[]): Promise<CounterResult[]>;
  /**
   * Add units already granted (write-behind, see `write-behind-counters.ts`) to the
   * windows they were granted in, whatever the limit, in one statement.
   * Returns each bucket's count after the add; a bucket whose row already
   * holds a newer window is left alone and missing from the result.
   */
  addAll(adds: readonly CounterAdd[]): Promise<Map<string, number>>;
  /** Give units back to the window they were taken from (work that never started). */
  refund(bucket: string, windowStart: Date, cost?: number): Promise<void>;
  /** Units used in the current window of `bucket` (0 when none). */
  usage(bucket: string, periodMs: number): Promise<{ used: number; resetAt: Date }>;
  /** Delete rows whose window ended; returns how many. */
  prune(): Promise<number>;
}

interface Row {
  count: number | string;
  window_start: Date | string;
  expires_at: Date | string;
}

const asDate = (v: Date | string) => (v instanceof Date ? v : new Date(v));

/** {@link QuotaCounters} on PostgreSQL or PGlite (table `<schema>.quota_counters`). */
export class PostgresQuotaCounters implements QuotaCounters {
  private readonly db: Kysely<unknown>;
  private readonly table;

  constructor(
    database: Database<unknown>,
    private readonly schema: string,
  ) {
    this.db = database.kysely as unknown as Kysely<unknown>;
    this.table = sql.id(this.schema, "quota_counters");
  }

  /** The window of `periodMs` that contains the database's now. */
  private window(periodMs: number) {
    const period = sql.lit(Math.trunc(periodMs));
    return sql`to_timestamp((floor(extract(epoch from clock_timestamp()) * 1000 / ${period}) * ${period} / 1000.0)::double precision)`;
  }

  async take(bucket: string, periodMs: number, limit: number, cost = 1): Promise<CounterResult> {
    const [result] = await this.takeAll([{ bucket, periodMs, limit, cost }]);
    if (result === undefined) throw new Error("quota counters: a take returned no result");
    return result;
  }

  async takeAll(takes: readonly CounterTake[]): Promise<CounterResult[]> {
    if (takes.length === 0) return [];
    if (new Set(takes.map((t) => t.bucket)).size !== takes.length) {
      throw new Error("quota counters: takeAll needs distinct buckets");
    }
    // t<i>: the upsert of counter i, run only when t<i-1> granted (returned its row).
    const upserts = takes.map((t, i) => {
      const cost = t.cost ?? 1;
      const start = this.window(t.periodMs);
      const seconds = sql.lit(Math.trunc(t.periodMs) / 1000);
      const previous = i === 0 ? sql`true` : sql`exists (select 1 from ${sql.ref(`t${i - 1}`)})`;
      return sql`${sql.ref(`t${i}`)} as (
        insert into ${this.table} as c (bucket, window_start, count, expires_at)
        select ${t.bucket}, w.start, ${cost}::bigint, w.start + make_interval(secs => ${seconds})
        from (select ${start} as start) w
        where ${cost}::bigint <= ${t.limit}::bigint and ${previous}
        on conflict (bucket) do update set
          count = case when c.window_start = excluded.window_start
                       then c.count + excluded.count else excluded.count end,
          window_start = excluded.window_start,
          expires_at = excluded.expires_at
        where c.window_start <> excluded.window_start
           or c.count + excluded.count <= ${t.limit}::bigint
        returning count, window_start, expires_at)`;
    });
    const granted = takes.map(
      (_, i) =>
        sql`select ${sql.lit(i)} as i, count, window_start, expires_at from ${sql.ref(`t${i}`)}`,
    );
    const result = await sql<Row & { i: number }>`
      with ${sql.join(upserts)}
      ${sql.join(granted, sql` union all `)}`.execute(this.db);
    const rows = new Map(result.rows.map((row) => [Number(row.i), row]));
    const out: CounterResult[] = [];
    for (const [i, t] of takes.entries()) {
      const row = rows.get(i);
      if (row === undefined) {
        // Refused (rare): its current state, read after the refusal like a take would.
        out.push(await this.refused(t));
        break;
      }
      out.push({
        allowed: true,
        used: Number(row.count),
        resetAt: asDate(row.expires_at),
        windowStart: asDate(row.window_start),
      });
    }
    return out;
  }

  /** The result of a refused take: the counter's current state. */
  private async refused({ bucket, periodMs }: CounterTake): Promise<CounterResult> {
    const current = await sql<Row>`
      select count, window_start, expires_at from ${this.table} where bucket = ${bucket}`.execute(
      this.db,
    );
    const found = current.rows[0];
    if (found === undefined) {
      // Only a cost above the limit gets here without a row.
      const now = Date.now();
      return {
        allowed: false,
        used: 0,
        resetAt: new Date(now + periodMs),
        windowStart: new Date(now),
      };
    }
    return {
      allowed: false,
      used: Number(found.count),
      resetAt: asDate(found.expires_at),
      windowStart: asDate(found.window_start),
    };
  }

  async addAll(adds: readonly CounterAdd[]): Promise<Map<string, number>> {
    if (adds.length === 0) return new Map();
    if (new Set(adds.map((a) => a.bucket)).size !== adds.length) {
      throw new Error("quota counters: addAll needs distinct buckets");
    }
    const values = adds.map(
      (a) =>
        sql`(${a.bucket}, ${a.windowStart}::timestamptz, ${a.cost}::bigint, ${a.resetAt}::timestamptz)`,
    );
    const result = await sql<{ bucket: string; count: number | string }>`
      insert into ${this.table} as c (bucket, window_start, count, expires_at)
      values ${sql.join(values)}
      on conflict (bucket) do update set
        count = case when c.window_start = excluded.window_start
                     then c.count + excluded.count else excluded.count end,
        window_start = excluded.window_start,
        expires_at = excluded.expires_at
      where c.window_start <= excluded.window_start
      returning bucket, count`.execute(this.db);
    return new Map(result.rows.map((row) => [row.bucket, Number(row.count)]));
  }

  async refund(bucket: string, windowStart: Date, cost = 1): Promise<void> {
    await sql`
      update ${this.table} set count = greatest(count - ${cost}::bigint, 0)
      where bucket = ${bucket} and window_start = ${windowStart}`.execute(this.db);
  }

  async usage(bucket: string, periodMs: number): Promise<{ used: number; resetAt: Date }> {
    const start = this.window(periodMs);
    const seconds = sql.lit(Math.trunc(periodMs) / 1000);
    const result = await sql<{ count: number | string | null; reset_at: Date | string }>`
      with w as (select ${start} as start)
      select (select count from ${this.table} c where c.bucket = ${bucket} and c.window_start = w.start) as count,
             w.start + make_interval(secs => ${seconds}) as reset_at
      from w`.execute(this.db);
    const row = result.rows[0];
    return {
      used: row?.count == null ? 0 : Number(row.count),
      resetAt: row ? asDate(row.reset_at) : new Date(),
    };
  }

  async prune(): Promise<number> {
    const result =
      await sql`delete from ${this.table} where expires_at < clock_timestamp()`.execute(this.db);
    return Number(result.numAffectedRows ?? 0n);
  }
}
