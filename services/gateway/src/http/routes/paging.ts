/** Paged reads of the REST routes: one page of a service's list answer as Harn JSON. */
import type { JsonValue } from "@bufbuild/protobuf";
import { listJson } from "../../domain/harn-json.js";
import type { RestResponse } from "../io.js";
import { ok } from "./common.js";

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
