/**
 * Server-side prepared statements for the statements storage repeats on
 * PGlite.
 *
 * Why: on PGlite every statement is parsed, analysed and planned inside the
 * WASM backend, and planning looks up each relation's size through the
 * emulated file system (an `fstat` per relation and index). A service issues
 * the same few statement texts over and over (kysely compiles a query shape
 * to the same SQL), so a text seen twice is prepared once (`PREPARE`) and
 * then run as `EXECUTE name(literal, …)` through the simple protocol: the
 * backend reuses the parsed statement and, once its cost model allows,
 * the plan (measured: a primary-key read 181 → ~100 µs of CPU).
 *
 * Why it is the same statement: the arguments are the literals of
 * `pglite-inline.ts`, untyped, so each is coerced to the type `PREPARE`
 * inferred for its placeholder from the same context an inlined literal is
 * resolved in. A text `PREPARE` refuses is remembered and inlined from then
 * on; inside a transaction the attempt runs under a savepoint, so a refusal
 * never aborts the caller's transaction.
 *
 * Prepared statements belong to the instance's one backend session and are
 * not transactional (a rolled-back transaction keeps them), so the cache is
 * per instance, shared by every view of it. It is bounded (the oldest is
 * deallocated). A DDL statement through any view deallocates them all, and a
 * statement the backend reports as changed ("cached plan must not change
 * result type", after DDL from elsewhere) is dropped and, outside a
 * transaction, run again inlined.
 */
import type { PGlite, Results, Transaction } from "@electric-sql/pglite";
import { inlineLiterals, parameterLiterals, placeholderCount } from "./pglite-inline.js";

/** Where a statement runs: the instance, or the transaction holding it. */
export type PGliteRunner = Pick<PGlite, "exec"> | Pick<Transaction, "exec">;

/** Prepared statements kept per instance; the oldest is deallocated beyond this. */
const PREPARED_LIMIT = 500;
/** Texts seen once that are remembered (the map is emptied when full). */
const SEEN_LIMIT = 5000;

interface Cache {
  /** Statement text → prepared name, oldest first. */
  names: Map<string, string>;
  /** Texts seen once: prepared at their second use. */
  seen: Set<string>;
  /** Texts PREPARE refused. */
  refused: Set<string>;
  /** Names left to deallocate (evicted or invalidated). */
  evicted: string[];
  next: number;
}

const caches = new WeakMap<object, Cache>();

function cacheOf(pglite: object): Cache {
  let cache = caches.get(pglite);
  if (cache === undefined) {
    cache = { names: new Map(), seen: new Set(), refused: new Set(), evicted: [], next: 0 };
    caches.set(pglite, cache);
  }
  return cache;
}

type Kind = "dml" | "ddl" | "other";

/** What a statement is, by its first keyword (after whitespace and comments). */
function kindOf(sql: string): Kind {
  const word = /^(?:\s|--[^\n]*\n|\/\*[\s\S]*?\*\/)*([A-Za-z]+)/.exec(sql)?.[1]?.toLowerCase();
  switch (word) {
    case "select":
    case "insert":
    case "update":
    case "delete":
    case "with":
      return "dml";
    case "create":
    case "alter":
    case "drop":
    case "comment":
    case "grant":
    case "revoke":
      return "ddl";
    default:
      return "other";
  }
}

const CHANGED_RESULT = "cached plan must not change result type";

function changedResult(error: unknown): boolean {
  return error instanceof Error && error.message.includes(CHANGED_RESULT);
}

/**
 * Runs `sql` with `params` through the simple protocol — as a prepared
 * statement when the text repeats, else with the parameters inlined — and
 * returns its last result; undefined when a parameter cannot be written as a
 * literal (the caller binds them instead).
 *
 * @param pglite the instance (the cache key)
 * @param on where to run it: the instance, or the transaction holding it
 * @param inTransaction whether `on` is a transaction
 */
export async function runSimple(
  pglite: object,
  on: PGliteRunner,
  inTransaction: boolean,
  sql: string,
  params: readonly unknown[],
): Promise<Results | undefined> {
  const cache = cacheOf(pglite);
  if (params.length === 0) {
    const results = await on.exec(sql);
    if (kindOf(sql) === "ddl") await forgetAll(cache, on);
    return last(results);
  }
  const literals = parameterLiterals(params);
  if (literals === undefined) return undefined;
  // A placeholder without a parameter: the caller binds them (and fails the same way).
  if (placeholderCount(sql) > params.length) return undefined;
  const inlined = () => inlineLiterals(sql, literals) as string;

  let name = cache.names.get(sql);
  if (name === undefined && !cache.refused.has(sql)) {
    if (!cache.seen.has(sql)) {
      if (cache.seen.size >= SEEN_LIMIT) cache.seen.clear();
      cache.seen.add(sql);
    } else if (kindOf(sql) === "dml" && placeholderCount(sql) === params.length) {
      cache.seen.delete(sql);
      name = await prepare(cache, on, inTransaction, sql);
    } else {
      cache.seen.delete(sql);
      cache.refused.add(sql);
    }
  }
  if (name === undefined) return last(await on.exec(inlined()));
  try {
    return last(await on.exec(`execute ${name}(${literals.join(", ")})`));
  } catch (error) {
    if (!changedResult(error)) throw error;
    // Prepared before a DDL statement that did not pass through here: drop
    // it; it is prepared again at its next uses.
    cache.names.delete(sql);
    cache.evicted.push(name);
    if (inTransaction) throw error;
    return last(await on.exec(inlined()));
  }
}

const empty: Results = { rows: [], fields: [], affectedRows: 0 };

function last(results: Results[]): Results {
  return results.at(-1) ?? empty;
}

/** Prepares `sql`; undefined (and remembered) when the backend refuses it. */
async function prepare(
  cache: Cache,
  on: PGliteRunner,
  inTransaction: boolean,
  sql: string,
): Promise<string | undefined> {
  while (cache.names.size >= PREPARED_LIMIT) {
    const [oldest, oldestName] = cache.names.entries().next().value as [string, string];
    cache.names.delete(oldest);
    cache.evicted.push(oldestName);
  }
  const name = `trellis_stmt_${cache.next++}`;
  const evicted = cache.evicted.splice(0);
  const deallocations = evicted.map((old) => `deallocate ${old}; `).join("");
  const statement = `${deallocations}prepare ${name} as ${sql}`;
  try {
    if (inTransaction) {
      await on.exec(`savepoint trellis_prepare; ${statement}; release savepoint trellis_prepare`);
    } else {
      await on.exec(statement);
    }
  } catch {
    if (inTransaction) {
      await on.exec("rollback to savepoint trellis_prepare; release savepoint trellis_prepare");
    }
    // With deallocations in front, one of them may be what failed (a name
    // already gone): they are dropped and the text is tried again later.
    if (evicted.length === 0) cache.refused.add(sql);
    return undefined;
  }
  cache.names.set(sql, name);
  return name;
}

/** After DDL: every prepared statement goes (plans and result types may have changed). */
async function forgetAll(cache: Cache, on: PGliteRunner): Promise<void> {
  if (cache.names.size === 0 && cache.evicted.length === 0) return;
  cache.names.clear();
  cache.evicted.length = 0;
  cache.refused.clear();
  await on.exec("deallocate all");
}
