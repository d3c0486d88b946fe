/**
 * Paging of the store's listings: one generic read ({@link readPage}) with
 * opaque tokens. A token is the cursor of the last row returned (base64url
 * of a decimal); listings by `seq` use {@link afterSeq} for the window.
 */
import { type SelectQueryBuilder, sql } from "kysely";
import { invalidRequest } from "../domain/errors.js";
import type { Page, PageRequest } from "./task-store.js";

/** The rows a page may read: after the cursor (exclusive), at most `limit`. */
export interface PageWindow {
  /** The cursor of the previous page's last row; undefined on the first page. */
  after: bigint | undefined;
  /** Rows to read: one more than the page holds, to learn whether more follow. */
  limit: number;
}

/**
 * One page of a listing: validates the request, reads the window with
 * `read`, and maps the rows; the next token is the `cursor` of the page's
 * last row when more rows follow.
 */
export async function readPage<R, T>(
  page: PageRequest,
  read: (window: PageWindow) => Promise<R[]>,
  cursor: (row: R) => bigint,
  map: (row: R) => T,
  budget?: PageBudget<R>,
): Promise<Page<T>> {
  const limit = pageLimit(page.pageSize);
  const after = pageAfter(page.pageToken);
  const rows = await read({ after, limit: limit + 1 });
  return paged(rows, budget ? keptWithin(rows, limit, budget) : limit, cursor, map);
}

/**
 * A bound on the work one page may cost besides its row count: rows are
 * weighed (say, the JSON values of their metadata, which become protobuf
 * Structs) and the page ends before the row that would pass `max` — at
 * least one row, and with a next token, so nothing is skipped.
 */
export interface PageBudget<R> {
  weigh: (row: R) => number;
  max: number;
}

/** How many of `rows` the page keeps: `limit`, or fewer when they weigh more than the budget. */
function keptWithin<R>(rows: readonly R[], limit: number, budget: PageBudget<R>): number {
  let spent = 0;
  const n = Math.min(rows.length, limit);
  for (let i = 0; i < n; i++) {
    spent += budget.weigh(rows[i] as R);
    if (spent > budget.max && i > 0) return i;
  }
  return limit;
}

/** A query's rows in `seq` order, in the page's window (for tables keyed by `seq`). */
export function afterSeq<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  window: PageWindow,
): SelectQueryBuilder<DB, TB, O> {
  const seq = sql.ref<bigint>("seq");
  const ordered = query.orderBy(seq).limit(window.limit);
  return window.after === undefined ? ordered : ordered.where(seq, ">", window.after);
}

function pageLimit(pageSize: number): number {
  if (!Number.isInteger(pageSize) || pageSize < 0 || pageSize > 1000) {
    throw invalidRequest("page_size must be 0…1000", "page_size");
  }
  return pageSize === 0 ? 100 : pageSize;
}

function pageAfter(token: string): bigint | undefined {
  if (token === "") return undefined;
  try {
    const value = BigInt(Buffer.from(token, "base64url").toString("utf8"));
    if (value < 0n) throw new Error("negative");
    return value;
  } catch {
    throw invalidRequest("page_token is not a token this service issued", "page_token");
  }
}

function pageToken(value: bigint): string {
  return Buffer.from(value.toString(), "utf8").toString("base64url");
}

function paged<T, R>(
  rows: R[],
  limit: number,
  cursor: (row: R) => bigint,
  map: (row: R) => T,
): Page<T> {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  const last = kept.at(-1);
  return {
    items: kept.map(map),
    nextPageToken: more && last !== undefined ? pageToken(cursor(last)) : "",
  };
}
