/**
 * Stored free-form values too large to hand out. The write paths now refuse
 * oversized structures (`@trellis/runtime` structure-limits), but values
 * stored before that (a session whose metadata has 200,000 keys) would still
 * cost seconds of event-loop time on every read: converting them to a
 * protobuf Struct, encoding, decoding. Reads replace such a value with a
 * small marker instead:
 *
 *  - in SQL, before the row is even parsed: `pg_column_size` (the stored,
 *    possibly compressed size; no detoasting) above {@link MAX_STORED_METADATA_BYTES};
 *  - in code, for what got through: more keys, values or depth than the
 *    write limits allow.
 */
import { defaultStructureLimits, findStructureViolation } from "@trellis/runtime";
import { type RawBuilder, sql } from "kysely";

/** Stored size above which a metadata column is not read (far above any value the limits accept). */
export const MAX_STORED_METADATA_BYTES = 2 * 1024 * 1024;

/** The key of the marker that stands for an omitted value. */
export const OMITTED_KEY = "trellis_omitted";

/** The marker: says why, never the value. */
export function omittedMarker(reason: string): Record<string, string> {
  return { [OMITTED_KEY]: `${reason}; stored before the limits applied, it is not served` };
}

/** `metadata`, or the marker when it is stored larger than {@link MAX_STORED_METADATA_BYTES}. */
export function boundedMetadataColumn(): RawBuilder<Record<string, unknown>> {
  const marker = JSON.stringify(omittedMarker("the metadata is too large"));
  return sql<Record<string, unknown>>`(CASE WHEN pg_column_size(metadata) > ${sql.lit(
    MAX_STORED_METADATA_BYTES,
  )} THEN ${sql.lit(marker)}::jsonb ELSE metadata END)`;
}

/** `value`, or the marker when it holds more than the structure limits allow. */
export function boundedStruct<T>(value: T): T | Record<string, string> {
  if (value === null || typeof value !== "object") return value;
  const violation = findStructureViolation(value, defaultStructureLimits);
  return violation === undefined ? value : omittedMarker(violation.message);
}

/** JSON values a list page's metadata may hold in all (see `paging.ts` PageBudget). */
export const PAGE_METADATA_BUDGET = 10_000;

/** How many JSON values `value` holds (each object, array and scalar counts one). */
export function jsonWeight(value: unknown): number {
  let count = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    count += 1;
    if (v === null || typeof v !== "object") continue;
    if (Array.isArray(v)) {
      for (const child of v) stack.push(child);
    } else {
      for (const key in v) {
        if (Object.hasOwn(v, key)) stack.push((v as Record<string, unknown>)[key]);
      }
    }
  }
  return count;
}
