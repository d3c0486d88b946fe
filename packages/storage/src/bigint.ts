/**
 * The one representation of 64-bit integers in Trellis storage: JS `bigint`.
 *
 * Why bigint: positions and sequences are `uint64` in the protobuf contracts
 * (→ `bigint` in protobuf-es) and in the EventLog port, so reading them as
 * anything else would need a conversion at every boundary. Out of the box `pg`
 * returns `int8` as a string and PGlite as a number (or a bigint above 2^53):
 * both dialects install the parsers below so every backend agrees.
 *
 * Writing: both drivers accept `bigint` (and `number`) parameters.
 */

/** Postgres type OID of `int8` / `bigint` (storage parses it as `bigint`). */
export const INT8_OID = 20;
/** Postgres type OID of `int8[]` (storage parses it as `bigint[]`). */
export const INT8_ARRAY_OID = 1016;

/** Parses the text form of an `int8`. */
export function parseInt8(text: string): bigint {
  return BigInt(text);
}

/** A parsed `int8[]` (possibly multi-dimensional; SQL NULL elements stay null). */
export type Int8Array = (bigint | null | Int8Array)[];

/** Parses the text form of an `int8[]`, e.g. `{1,2,NULL}` or `{{1,2},{3,4}}`. */
export function parseInt8Array(text: string): Int8Array {
  let i = 0;
  const parseLevel = (): Int8Array => {
    // text[i] is "{"
    i++;
    const out: Int8Array = [];
    let token = "";
    const flush = () => {
      if (token === "") return;
      out.push(token === "NULL" ? null : BigInt(token));
      token = "";
    };
    while (i < text.length) {
      const c = text[i];
      if (c === "{") {
        out.push(parseLevel());
        continue;
      }
      i++;
      if (c === "}") break;
      if (c === ",") flush();
      else if (c !== " ") token += c;
    }
    flush();
    return out;
  };
  // Arrays may carry explicit bounds ("[0:1]={1,2}"); skip to the first brace.
  i = text.indexOf("{");
  return i < 0 ? [] : parseLevel();
}
