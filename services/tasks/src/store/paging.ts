/**
 * Paging of the smaller stores (branches, connectors): `seq` is the listing
 * order and the cursor; a token is the last seq seen, base64url. Same rules
 * and messages as the task store's own paging.
 */
import { invalidRequest } from "../domain/errors.js";
import type { Page } from "./task-store.js";

/** `page_size` 0…1000 (0 = 100). */
export function pageLimit(pageSize: number): number {
  if (!Number.isInteger(pageSize) || pageSize < 0 || pageSize > 1000) {
    throw invalidRequest("page_size must be 0…1000", "page_size");
  }
  return pageSize === 0 ? 100 : pageSize;
}

/** The seq a page token continues after (undefined for the first page). */
export function pageAfter(token: string): bigint | undefined {
  if (token === "") return undefined;
  try {
    const value = BigInt(Buffer.from(token, "base64url").toString("utf8"));
    if (value < 0n) throw new Error("negative");
    return value;
  } catch {
    throw invalidRequest("page_token is not a token this service issued", "page_token");
  }
}

/** A page of `rows` (read with `limit + 1` to know whether more follow). */
export function paged<T, R extends { seq: bigint }>(
  rows: R[],
  limit: number,
  map: (row: R) => T,
): Page<T> {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  const last = kept.at(-1);
  return {
    items: kept.map(map),
    nextPageToken:
      more && last !== undefined ? Buffer.from(String(last.seq), "utf8").toString("base64url") : "",
  };
}
