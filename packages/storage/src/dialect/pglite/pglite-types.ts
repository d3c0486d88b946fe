import type { ParserOptions, PGlite, QueryOptions } from "@electric-sql/pglite";
import type { PGlite as KyselyPGlite } from "kysely";
import { INT8_ARRAY_OID, INT8_OID, parseInt8, parseInt8Array } from "../../bigint.js";

/**
 * The PGlite parsers of storage: `int8` and `int8[]` read as `bigint` (PGlite
 * alone returns a number below 2^53 and a bigint above, see `bigint.ts`).
 */
export const pgliteParsers: ParserOptions = {
  [INT8_OID]: parseInt8,
  [INT8_ARRAY_OID]: parseInt8Array,
};

const withParsers = (options: QueryOptions | undefined): QueryOptions => ({
  ...options,
  parsers: { ...pgliteParsers, ...options?.parsers },
});

/**
 * The view of a PGlite instance that storage hands to kysely's
 * `PGliteDialect`. It differs from the instance in two ways:
 *
 * - every query uses {@link pgliteParsers}, so an instance created elsewhere
 *   (without them) still reads `int8` as `bigint`;
 * - `close()` does nothing: kysely's `destroy()` closes the instance it was
 *   given, but a shared instance must outlive each service's database. The
 *   owner closes the real instance.
 */
export function kyselyView(pglite: PGlite): KyselyPGlite {
  return {
    get closed() {
      return pglite.closed;
    },
    get ready() {
      return pglite.ready;
    },
    get waitReady() {
      return pglite.waitReady;
    },
    close: async () => {},
    query: (query, params, options) => pglite.query(query, params, withParsers(options)),
    transaction: (callback) =>
      pglite.transaction((tx) =>
        callback({
          query: (query, params, options) => tx.query(query, params, withParsers(options)),
          rollback: () => tx.rollback(),
        }),
      ),
  };
}
