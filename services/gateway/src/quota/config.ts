/**
 * Rate limits and hard quotas, from the environment. Defaults are generous:
 * they stop a runaway client, not normal use.
 *
 * - `TRELLIS_RATE_LIMIT_ACTOR`     writes per actor (API key / client), default `6000/1m`
 * - `TRELLIS_RATE_LIMIT_WORKSPACE` writes per workspace, default `30000/1m`
 * - `TRELLIS_RATE_LIMIT_AGENT`     task submissions per agent (persona), default `3000/1m`
 * - `TRELLIS_RATE_LIMIT_READS`     reads per actor (REST GET, read RPCs, stream opens), default `30000/1m`
 * - `TRELLIS_QUOTA_TASKS_PER_DAY`  tasks a workspace may start per UTC day (hard), default `100000`
 * - `TRELLIS_RATE_LIMIT_READS_FLUSH` how often a replica writes the read counts it holds
 *   (`write-behind-counters.ts`), default `100ms`, and `1s` where the gateway is the only
 *   replica by construction (embedded, on PGlite: its counts are exact in memory, a crash
 *   loses at most the last second of them); `0` counts every read with its own statement
 *   (exact across replicas)
 * - `TRELLIS_RATE_LIMIT_WRITES_FLUSH` the same for write rates and the daily task quota;
 *   default `1s` where the gateway is the only replica and `0` on PostgreSQL, where
 *   replicas share the counters exactly
 * - `TRELLIS_RATE_LIMIT_BLOCK` with exact write counters (`…_WRITES_FLUSH=0`): the most
 *   units a replica takes from the shared counters at once, to grant from memory
 *   (`reserved-counters.ts`), default `64`; `1` counts every write with its own statement
 *
 * A rate is `<count>/<window>` (`120/1m`, `10/30s`, `5000/1h`); `off` disables a limit.
 */
import { TrellisError } from "@trellis/runtime";

/** One limit: at most `limit` units per window of `periodMs`. */
export interface RateLimit {
  limit: number;
  periodMs: number;
}

export interface LimitsConfig {
  actor?: RateLimit;
  workspace?: RateLimit;
  agent?: RateLimit;
  /** Reads per actor (writes have their own rates). */
  reads?: RateLimit;
  /** Write-behind interval of the read counters (0: write every read at once). */
  readsFlushMs?: number;
  /** Write-behind interval of the write counters and the daily quota (0: exact, see `writesBlock`). */
  writesFlushMs?: number;
  /** With exact write counters: the most units a replica takes at once (1: a statement per write). */
  writesBlock?: number;
  /** Hard quota: tasks per workspace per UTC day. */
  tasksPerDay?: number;
}

export const dayMs = 24 * 3_600_000;

const units: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: dayMs };

/** Parse `<count>/<window>`; undefined for `off`. */
export function parseRate(name: string, raw: string): RateLimit | undefined {
  const text = raw.trim().toLowerCase();
  if (text === "off") return undefined;
  const match = /^(\d+)\s*\/\s*(\d*)\s*(ms|s|m|h|d)$/.exec(text);
  const limit = match ? Number(match[1]) : Number.NaN;
  const periodMs = match
    ? Number(match[2] === "" ? 1 : match[2]) * (units[match[3] ?? ""] ?? 0)
    : 0;
  if (!Number.isSafeInteger(limit) || limit < 1 || periodMs < 1_000 || periodMs > 31 * dayMs) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `${name} must be <count>/<window> with a count ≥ 1 and a window from 1s to 31d (e.g. 600/1m), or off; got ${JSON.stringify(raw)}`,
      param: name,
    });
  }
  return { limit, periodMs };
}

/** `text` as a whole number of digits only, else NaN. */
function wholeNumber(text: string): number {
  return /^\d+$/.test(text) ? Number(text) : Number.NaN;
}

function parseCount(name: string, raw: string): number | undefined {
  const text = raw.trim().toLowerCase();
  if (text === "off") return undefined;
  const value = wholeNumber(text);
  if (!Number.isSafeInteger(value) || value < 1) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `${name} must be a positive integer or off; got ${JSON.stringify(raw)}`,
      param: name,
    });
  }
  return value;
}

/**
 * The write-behind interval of an only replica (embedded): nothing else
 * counts, so the limits stay exact; a crash loses at most this much of the
 * counts. One flush a second instead of one per turn at one turn in flight.
 */
const ONLY_REPLICA_FLUSH = "1s";

/** A flush interval: `0`, or `<n>ms` / `<n>s` up to 10 s. */
function parseFlush(name: string, raw: string): number {
  const match = /^(\d+)\s*(ms|s)?$/.exec(raw.trim().toLowerCase());
  const value = match ? Number(match[1]) * (match[2] === "s" ? 1_000 : 1) : Number.NaN;
  if (!Number.isSafeInteger(value) || value > 10_000 || (value > 0 && !match?.[2])) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `${name} must be 0 (off) or an interval up to 10s (e.g. 100ms); got ${JSON.stringify(raw)}`,
      param: name,
    });
  }
  return value;
}

/** `TRELLIS_RATE_LIMIT_BLOCK`: 1 to 10000 units. */
function parseBlock(raw: string): number {
  const value = wholeNumber(raw.trim());
  if (!Number.isSafeInteger(value) || value < 1 || value > 10_000) {
    throw new TrellisError({
      reason: "config_invalid",
      message: `TRELLIS_RATE_LIMIT_BLOCK must be a whole number of units from 1 (a statement per write) to 10000; got ${JSON.stringify(raw)}`,
      param: "TRELLIS_RATE_LIMIT_BLOCK",
    });
  }
  return value;
}

/**
 * Read the limits from the host's environment. `onlyReplica`: the gateway
 * is the only one counting (embedded), so write counts may be written behind
 * by default too, and both once a second.
 */
export function loadLimitsConfig(
  env: Readonly<Record<string, string | undefined>>,
  options: { onlyReplica?: boolean } = {},
): LimitsConfig {
  const rate = (name: string, fallback: string) => parseRate(name, env[name] ?? fallback);
  const actor = rate("TRELLIS_RATE_LIMIT_ACTOR", "6000/1m");
  const workspace = rate("TRELLIS_RATE_LIMIT_WORKSPACE", "30000/1m");
  const agent = rate("TRELLIS_RATE_LIMIT_AGENT", "3000/1m");
  const reads = rate("TRELLIS_RATE_LIMIT_READS", "30000/1m");
  const readsFlushMs = parseFlush(
    "TRELLIS_RATE_LIMIT_READS_FLUSH",
    env.TRELLIS_RATE_LIMIT_READS_FLUSH ?? (options.onlyReplica ? ONLY_REPLICA_FLUSH : "100ms"),
  );
  const writesFlushMs = parseFlush(
    "TRELLIS_RATE_LIMIT_WRITES_FLUSH",
    env.TRELLIS_RATE_LIMIT_WRITES_FLUSH ?? (options.onlyReplica ? ONLY_REPLICA_FLUSH : "0"),
  );
  const writesBlock = parseBlock(env.TRELLIS_RATE_LIMIT_BLOCK ?? "64");
  const tasksPerDay = parseCount(
    "TRELLIS_QUOTA_TASKS_PER_DAY",
    env.TRELLIS_QUOTA_TASKS_PER_DAY ?? "100000",
  );
  return {
    ...(actor ? { actor } : {}),
    ...(workspace ? { workspace } : {}),
    ...(agent ? { agent } : {}),
    ...(reads ? { reads, readsFlushMs } : {}),
    writesFlushMs,
    writesBlock,
    ...(tasksPerDay !== undefined ? { tasksPerDay } : {}),
  };
}
