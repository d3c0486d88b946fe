/** Paged reads of the REST routes: the page a request asks for, and the page answered. */
import type { JsonValue } from "@bufbuild/protobuf";
import { errors } from "@trellis/runtime";
import { listJson } from "../../domain/harn-json.js";
import type { RestCall } from "../context.js";
import type { RestResponse } from "../io.js";
import { ok } from "./common.js";

/** `limit` (1–200, default 50) and `cursor` of a list request. */
export function pageOf(call: RestCall): { pageSize: number; pageToken: string } {
  return { pageSize: limitOf(call, 50), pageToken: call.query.get("cursor") ?? "" };
}

/** `limit` of a read (1–200; `fallback` when not given). */
export function limitOf(call: RestCall, fallback: number): number {
  const raw = call.query.get("limit");
  if (raw === null || raw === "") return fallback;
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < 1 || value > 200) {
    throw errors.invalid(
      `limit must be an integer between 1 and 200, got ${JSON.stringify(raw)}`,
      "limit",
    );
  }
  return value;
}

/**
 * 200 with one page of a paged read: each item as its Harn JSON, and the
 * cursor of the next page (none when the token is empty or not given: a
 * read answered whole is its own last page).
 */
export function okPage<T>(
  items: readonly T[],
  toHarn: (item: T) => JsonValue,
  nextPageToken = "",
): RestResponse {
  return ok(
    listJson(
      items.map((item) => toHarn(item)),
      { nextCursor: nextPageToken },
    ),
  );
}
