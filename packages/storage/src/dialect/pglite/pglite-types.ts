import type { ParserOptions, PGlite, QueryOptions, SerializerOptions } from "@electric-sql/pglite";
import { INT8_ARRAY_OID, INT8_OID, parseInt8, parseInt8Array } from "../../bigint.js";
import type { PGliteClient } from "./pglite-dialect.js";
import { runSimple } from "./pglite-prepared.js";

/** Postgres type OID of `bytea`. */
const BYTEA_OID = 17;

/**
 * Parses the text form of a `bytea` (`\x` + hex). PGlite's own parser calls
 * `parseInt` per byte, which made bytea columns (outbox bodies, messages,
 * task inputs) a large share of a turn's CPU; this decodes natively.
 */
export function parseBytea(text: string): Uint8Array {
  // Hex is bytea_output's default, which storage never changes.
  const bytes = Buffer.from(text.slice(2), "hex");
  // A plain Uint8Array (not a pooled Buffer view), as PGlite returned before.
  return new Uint8Array(bytes);
}

/** Serializes a `bytea` parameter (hex form); PGlite's own builds one string per byte. */
export function serializeBytea(value: unknown): string {
  if (!(value instanceof Uint8Array)) throw new Error("Invalid input for bytea type");
  return `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")}`;
}

/**
 * The PGlite parsers of storage: `int8` and `int8[]` read as `bigint` (PGlite
 * alone returns a number below 2^53 and a bigint above, see `bigint.ts`);
 * `bytea` decoded natively.
 */
export const pgliteParsers: ParserOptions = {
  [INT8_OID]: parseInt8,
  [INT8_ARRAY_OID]: parseInt8Array,
  [BYTEA_OID]: parseBytea,
};

/** The PGlite serializers of storage: `bytea` encoded natively. */
export const pgliteSerializers: SerializerOptions = {
  [BYTEA_OID]: serializeBytea,
};

const withParsers = (options: QueryOptions | undefined): QueryOptions => ({
  ...options,
  parsers: { ...pgliteParsers, ...options?.parsers },
  serializers: { ...pgliteSerializers, ...options?.serializers },
});

/**
 * Whether the instance was opened with storage's parsers and serializers
 * (see `openPGlite`): then queries need no per-call options — passing parsers
 * per query makes PGlite copy its whole parser table on every statement.
 */
function hasStorageTypes(pglite: PGlite): boolean {
  const parsers = (pglite as { parsers?: Record<number, unknown> }).parsers;
  const serializers = (pglite as { serializers?: Record<number, unknown> }).serializers;
  // int8[] is not compared: PGlite replaces every array type's parser with
  // its own, which parses elements with the element type's parser (ours).
  return (
    parsers?.[INT8_OID] === parseInt8 &&
    parsers[BYTEA_OID] === parseBytea &&
    serializers?.[BYTEA_OID] === serializeBytea
  );
}

/**
 * The view of a PGlite instance that storage hands to its kysely
 * `PGliteDialect` (`pglite-dialect.ts`). It differs from the instance in two ways:
 *
 * - every query uses {@link pgliteParsers} and {@link pgliteSerializers}, so
 *   an instance created elsewhere (without them) still reads `int8` as
 *   `bigint` (an instance from `openPGlite` has them already: no per-query
 *   options then);
 * - `close()` does nothing: kysely's `destroy()` closes the instance it was
 *   given, but a shared instance must outlive each service's database. The
 *   owner closes the real instance.
 */
export function kyselyView(pglite: PGlite): PGliteClient {
  const ownTypes = hasStorageTypes(pglite);
  const options = ownTypes ? (given: QueryOptions | undefined) => given : withParsers;
  // Statements go through the cheaper simple protocol when their parameters
  // can be written as literals (see pglite-inline.ts) and the instance reads
  // results with storage's parsers (exec takes no per-call parsers).
  // Repeated statements run prepared (see pglite-prepared.ts).
  type Runner = Pick<PGlite, "query" | "exec">;
  const run = async (
    on: Runner,
    inTransaction: boolean,
    query: string,
    params: unknown[] | undefined,
    given?: QueryOptions,
  ) => {
    const simple =
      ownTypes && given?.rowMode !== "array"
        ? await runSimple(pglite, on, inTransaction, query, params ?? [])
        : undefined;
    return simple ?? on.query(query, params, options(given));
  };
  return {
    get closed() {
      return pglite.closed;
    },
    close: async () => {},
    query: (query, params, given) => run(pglite, false, query, params, given) as never,
    transaction: (callback) =>
      pglite.transaction((tx) =>
        callback({
          query: (query, params, given) => run(tx, true, query, params, given) as never,
          rollback: () => tx.rollback(),
        }),
      ),
  };
}
