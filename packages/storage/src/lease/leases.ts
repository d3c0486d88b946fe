import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { type RawBuilder, sql } from "kysely";
import { type BackgroundErrorHandler, type Database, warnBackgroundError } from "../database.js";
import { storageError } from "../errors.js";
import { assertSchemaName } from "../schema-name.js";

/** Options of {@link createLeases}. */
export interface LeasesOptions<DB = unknown> {
  database: Database<DB>;
  /** The schema holding `session_leases` (`leaseMigrations`) and `journal` (`journalMigrations`). */
  schema: string;
  /**
   * This process's owner id; must be unique among live processes (a
   * restarted process takes a new one). Default: `<host>-<pid>-<random>`.
   */
  owner?: string;
  /** How long a lease lasts without renewal, on the database clock (default 10,000 ms). */
  ttlMs?: number;
  /** How often held leases are renewed, all in one statement (default ttlMs / 3; < ttlMs). */
  renewEveryMs?: number;
  /** At most this many leases held at once (default 10,000); more → `rate_limited`. */
  maxLeases?: number;
  /** Called once per lease lost (also registrable with {@link Leases.onLost}). */
  onLost?: LostListener;
  /** Renewal rounds that failed (database unreachable); default: one warning line. */
  onError?: BackgroundErrorHandler;
}

/** What {@link Leases.acquire} answers. */
export type AcquireResult =
  | {
      acquired: true;
      stream: string;
      /** One more than any earlier holder's fence of this stream. */
      fence: bigint;
      /**
       * The stream's journal head when the lease was taken: the
       * `expectedPosition` of the new owner's first append, after it rebuilt
       * the stream from the journal up to here.
       */
      expectedPosition: bigint;
      /** The lease was held by another owner before and had lapsed. */
      tookOver: boolean;
      /** That owner (when `tookOver`). */
      previousOwner?: string;
    }
  | {
      acquired: false;
      stream: string;
      /** The owner holding it now. */
      ownedBy: string;
      /** Its expiry on the database clock; try again after it (or forward to `ownedBy`). */
      until: Date;
    };

/** A lease given up involuntarily. */
export interface LostLease {
  stream: string;
  fence: bigint;
  /**
   * `taken`: another owner holds it now (`ownedBy`); `expired`: its time ran
   * out on the database clock, or could not be renewed in time (database
   * unreachable) — either way this process must stop writing the stream.
   */
  reason: "taken" | "expired";
  ownedBy?: string;
}

export type LostListener = (lost: LostLease) => void;

/** A lease this process holds. */
export interface HeldLease {
  stream: string;
  fence: bigint;
  /** Local clock (`performance.now()` scale): held at least until here, if not lost earlier. */
  validUntil: number;
}

/** Counters of a {@link Leases}. */
export interface LeaseStats {
  held: number;
  acquired: number;
  refused: number;
  tookOver: number;
  released: number;
  lost: number;
  /** Renewal rounds run (one statement each, plus one when a loss is found). */
  rounds: number;
  /** Renewal rounds that failed. */
  failedRounds: number;
}

/**
 * Session ownership under leases: one row per stream in
 * `<schema>.session_leases`, expiring on the database clock.
 *
 * | it promises | how |
 * |---|---|
 * | at most one live holder per stream, across processes | acquire is one `insert … on conflict do update … where expired or mine`: the row lock serialises racers; exactly one sees its row returned |
 * | a new holder gets a new fence and the stream's head | the fence is the row's + 1 (rows are never deleted); the head is read from `<schema>.journal` in the same statement |
 * | renewal costs one statement per round, whatever the count | `update … where owner = me and expires_at > now()` returns what is still held |
 * | a lease found taken or expired is reported at once | what the round did not return is lost: `onLost` listeners run before the round resolves |
 * | not held past its deadline while the database is away | each lease keeps a local deadline (send time of its last successful renewal + ttl, earlier than the database's); a failed round reports those past it as lost |
 * | idle owners do not spin | one renewal timer (unref'd), running only while leases are held |
 * | bounded | `maxLeases` → `rate_limited`; bad arguments → `invalid_request`; closed or database errors → `service_unavailable` |
 *
 * The lease says who *should* write a stream; the journal's
 * `expectedPosition` guarantees one history: once the new owner appended,
 * a deposed owner's append with its old expectation is refused
 * (`conflict`). If the deposed owner slips an append in first, the new
 * owner's first append is the one refused; it rereads the stream after
 * `expectedPosition` and continues from there.
 */
export interface Leases {
  readonly owner: string;
  acquire(stream: string): Promise<AcquireResult>;
  /** Gives the lease up (others may take it at once). False when it was not held. */
  release(stream: string): Promise<boolean>;
  /** Runs a renewal round now (after one in flight); resolves with what it found lost. */
  renew(): Promise<LostLease[]>;
  /** The lease on `stream` if held and within its local deadline. */
  held(stream: string): HeldLease | undefined;
  onLost(listener: LostListener): () => void;
  stats(): LeaseStats;
  /** Stops renewing and releases every held lease (one statement). */
  close(): Promise<void>;
}

const MAX_STREAM_LENGTH = 512;

/** Opens the lease set of one owner (process). See {@link Leases}. */
export function createLeases<DB>(options: LeasesOptions<DB>): Leases {
  const { database, schema } = options;
  assertSchemaName(schema);
  const ttlMs = options.ttlMs ?? 10_000;
  const renewEveryMs = options.renewEveryMs ?? Math.floor(ttlMs / 3);
  const maxLeases = options.maxLeases ?? 10_000;
  const owner = options.owner ?? `${hostname()}-${process.pid}-${randomBytes(4).toString("hex")}`;
  const onError = options.onError ?? warnBackgroundError;
  if (!Number.isInteger(ttlMs) || ttlMs < 1) {
    throw invalid("ttlMs must be a positive integer", "ttlMs");
  }
  if (!Number.isInteger(renewEveryMs) || renewEveryMs < 1 || renewEveryMs >= ttlMs) {
    throw invalid("renewEveryMs must be a positive integer below ttlMs", "renewEveryMs");
  }
  if (!Number.isInteger(maxLeases) || maxLeases < 1) {
    throw invalid("maxLeases must be a positive integer", "maxLeases");
  }
  if (owner.length === 0 || owner.length > MAX_STREAM_LENGTH) {
    throw invalid(`owner must be 1–${MAX_STREAM_LENGTH} characters`, "owner");
  }

  const table = sql.id(schema, "session_leases");
  const journal = sql.id(schema, "journal");
  const ttl: RawBuilder<unknown> = sql`(cast(${ttlMs} as integer) * interval '1 millisecond')`;
  const db = database.kysely;

  const holding = new Map<string, HeldLease>();
  const listeners = new Set<LostListener>();
  if (options.onLost) listeners.add(options.onLost);
  const stats: Omit<LeaseStats, "held"> = {
    acquired: 0,
    refused: 0,
    tookOver: 0,
    released: 0,
    lost: 0,
    rounds: 0,
    failedRounds: 0,
  };
  let acquiring = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let round: Promise<LostLease[]> | undefined;

  const schedule = () => {
    if (closed || timer !== undefined || holding.size === 0) return;
    timer = setTimeout(() => {
      timer = undefined;
      renew().then(schedule, (error) => {
        onError(error, `lease renewal of ${owner}`);
        schedule();
      });
    }, renewEveryMs);
    timer.unref();
  };

  const lose = (lost: LostLease) => {
    const held = holding.get(lost.stream);
    if (held === undefined || held.fence !== lost.fence) return false;
    holding.delete(lost.stream);
    stats.lost++;
    for (const listener of listeners) {
      try {
        listener(lost);
      } catch (error) {
        onError(error, `lost-lease listener of ${owner}`);
      }
    }
    return true;
  };

  const runRound = async (): Promise<LostLease[]> => {
    if (holding.size === 0) return [];
    // Judge only what was held when the round started, by fence: an acquire
    // or release racing the round is not mistaken for a loss.
    const judged = new Map([...holding].map(([stream, held]) => [stream, held.fence]));
    const sentAt = performance.now();
    stats.rounds++;
    let renewed: Map<string, bigint>;
    try {
      const result = await sql<{ stream: string; fence: bigint }>`
        update ${table} set expires_at = now() + ${ttl}
        where owner = ${owner} and expires_at > now()
        returning stream, fence`.execute(db);
      renewed = new Map(result.rows.map((row) => [row.stream, BigInt(row.fence)]));
    } catch (error) {
      stats.failedRounds++;
      const now = performance.now();
      const lost: LostLease[] = [];
      for (const [stream, fence] of judged) {
        const held = holding.get(stream);
        if (held !== undefined && held.fence === fence && held.validUntil <= now) {
          const entry: LostLease = { stream, fence, reason: "expired" };
          if (lose(entry)) lost.push(entry);
        }
      }
      throw unavailable(`renewing the leases of ${owner} failed`, error, lost.length);
    }
    const missing: string[] = [];
    for (const [stream, fence] of judged) {
      const held = holding.get(stream);
      if (held === undefined || held.fence !== fence) continue;
      if (renewed.get(stream) === fence) held.validUntil = sentAt + ttlMs;
      else missing.push(stream);
    }
    if (missing.length === 0) return [];
    // Why they are gone: taken by another owner, or expired.
    const now = await sql<{ stream: string; owner: string; expires_at: Date; live: boolean }>`
      select stream, owner, expires_at, expires_at > now() as live from ${table}
      where stream in (${sql.join(missing)})`
      .execute(db)
      .then((r) => new Map(r.rows.map((row) => [row.stream, row])))
      .catch(() => new Map<string, { owner: string; live: boolean }>());
    const lost: LostLease[] = [];
    for (const stream of missing) {
      const fence = judged.get(stream) as bigint;
      const row = now.get(stream);
      const entry: LostLease =
        row !== undefined && row.owner !== owner && row.live
          ? { stream, fence, reason: "taken", ownedBy: row.owner }
          : { stream, fence, reason: "expired" };
      if (lose(entry)) lost.push(entry);
    }
    return lost;
  };

  const renew = (): Promise<LostLease[]> => {
    if (closed) return Promise.reject(closedError());
    const next = (round ?? Promise.resolve([])).catch(() => []).then(runRound);
    round = next;
    const done = () => {
      if (round === next) round = undefined;
    };
    // Both settle paths handled here: the caller sees the rejection, not this.
    next.then(done, done);
    return next;
  };

  const acquire = async (stream: string): Promise<AcquireResult> => {
    if (closed) throw closedError();
    checkStream(stream);
    if (!holding.has(stream) && holding.size + acquiring >= maxLeases) {
      throw storageError({
        reason: "rate_limited",
        message: `owner ${owner} holds ${maxLeases} leases, its limit; release some first`,
        param: "maxLeases",
        metadata: { limit: String(maxLeases), owner },
      });
    }
    acquiring++;
    try {
      // A lease released or expiring between our two statements is retried.
      for (let attempt = 0; ; attempt++) {
        const sentAt = performance.now();
        const taken = await sql<{
          fence: bigint;
          previous_owner: string | null;
          head: bigint;
        }>`
          with previous as (select owner from ${table} where stream = ${stream}),
          taken as (
            insert into ${table} as l (stream, owner, fence, expires_at, acquired_at)
            values (${stream}, ${owner}, 1, now() + ${ttl}, now())
            on conflict (stream) do update
              set owner = excluded.owner, fence = l.fence + 1,
                  expires_at = excluded.expires_at, acquired_at = excluded.acquired_at
              where l.expires_at <= now() or l.owner = excluded.owner
            returning fence)
          select taken.fence, (select owner from previous) as previous_owner,
            (select coalesce(max(position), 0) from ${journal} where stream = ${stream}) as head
          from taken`
          .execute(db)
          .catch((error) => {
            throw unavailable(`acquiring the lease on ${stream} failed`, error);
          });
        const row = taken.rows[0];
        if (row !== undefined) {
          const fence = BigInt(row.fence);
          const previous = row.previous_owner ?? undefined;
          const tookOver = previous !== undefined && previous !== owner;
          holding.set(stream, { stream, fence, validUntil: sentAt + ttlMs });
          stats.acquired++;
          if (tookOver) stats.tookOver++;
          schedule();
          return {
            acquired: true,
            stream,
            fence,
            expectedPosition: BigInt(row.head),
            tookOver,
            ...(tookOver ? { previousOwner: previous } : {}),
          };
        }
        const holder = await sql<{ owner: string; expires_at: Date }>`
          select owner, expires_at from ${table}
          where stream = ${stream} and expires_at > now()`
          .execute(db)
          .catch((error) => {
            throw unavailable(`reading the lease on ${stream} failed`, error);
          });
        const other = holder.rows[0];
        if (other !== undefined || attempt >= 2) {
          stats.refused++;
          // Held here but taken there: report it now, not at the next round.
          const mine = holding.get(stream);
          if (mine !== undefined && other !== undefined && other.owner !== owner) {
            lose({ stream, fence: mine.fence, reason: "taken", ownedBy: other.owner });
          }
          return {
            acquired: false,
            stream,
            ownedBy: other?.owner ?? "",
            until: other?.expires_at ?? new Date(),
          };
        }
      }
    } finally {
      acquiring--;
    }
  };

  const release = async (stream: string): Promise<boolean> => {
    checkStream(stream);
    const held = holding.get(stream);
    if (held === undefined) return false;
    holding.delete(stream);
    stats.released++;
    // '-infinity', not now(): a renewal racing this update must not match it again.
    await sql`
      update ${table} set expires_at = '-infinity'
      where stream = ${stream} and owner = ${owner} and fence = ${held.fence}`
      .execute(db)
      .catch((error) => {
        throw unavailable(`releasing the lease on ${stream} failed`, error);
      });
    if (holding.size === 0 && timer !== undefined) {
      clearTimeout(timer);
      timer = undefined;
    }
    return true;
  };

  return {
    owner,
    acquire,
    release,
    renew,
    held(stream) {
      const held = holding.get(stream);
      return held !== undefined && held.validUntil > performance.now() ? { ...held } : undefined;
    },
    onLost(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    stats: () => ({ ...stats, held: holding.size }),
    async close() {
      if (closed) return;
      closed = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await round?.catch(() => undefined);
      if (holding.size === 0) return;
      stats.released += holding.size;
      holding.clear();
      await sql`update ${table} set expires_at = '-infinity' where owner = ${owner}`
        .execute(db)
        .catch((error) => onError(error, `releasing the leases of ${owner} at close`));
    },
  };
}

function checkStream(stream: string): void {
  if (typeof stream !== "string" || stream.length === 0 || stream.length > MAX_STREAM_LENGTH) {
    throw invalid(`stream must be 1–${MAX_STREAM_LENGTH} characters`, "stream");
  }
}

function invalid(message: string, param: string) {
  return storageError({ reason: "invalid_request", message, param });
}

function closedError() {
  return storageError({
    reason: "service_unavailable",
    message: "the lease set is closed",
    metadata: { dependency: "leases" },
  });
}

function unavailable(message: string, cause: unknown, lost?: number) {
  return storageError({
    reason: "service_unavailable",
    message: `${message}: ${cause instanceof Error ? cause.message : String(cause)}`,
    metadata: { dependency: "leases", ...(lost === undefined ? {} : { lost: String(lost) }) },
    cause,
  });
}
