import pg from "pg";
import { INT8_ARRAY_OID, INT8_OID, parseInt8, parseInt8Array } from "../../bigint.js";

/**
 * The `pg` type parsers of a storage pool: `int8` and `int8[]` read as
 * `bigint` (see `bigint.ts`). Scoped to the pool — the process-wide
 * `pg.types` registry is left alone, so other `pg` users are unaffected.
 */
export function createPostgresTypes(): pg.CustomTypesConfig {
  const types = new pg.TypeOverrides();
  types.setTypeParser(INT8_OID, "text", parseInt8);
  types.setTypeParser(INT8_ARRAY_OID, "text", parseInt8Array);
  return types;
}
