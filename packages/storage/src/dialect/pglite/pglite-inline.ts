/**
 * Runs parameterised statements through PGlite's simple query protocol with
 * the parameters written into the SQL as quoted literals.
 *
 * Why: PGlite's extended protocol (parse, describe, bind, execute, sync, each
 * crossing into WASM) costs about twice the CPU of one simple `Query`
 * message for the short statements storage issues (measured on a task
 * turn's statements: ~0.35 ms → ~0.19 ms). A turn runs dozens of them.
 *
 * Why it is the same statement: every value becomes a single-quoted string
 * literal. An untyped literal is of type `unknown` and is resolved from its
 * context exactly like an untyped bind parameter (which is what kysely
 * sends), so `$1` and `'…'` pick the same column type, operator and
 * function. Only values whose text form does not depend on the target type
 * are inlined (strings, numbers, bigints, booleans, dates, byte arrays,
 * null); a statement with any other value (arrays, objects) keeps the
 * extended protocol. Quoting is the standard-SQL rule (double the quote;
 * `standard_conforming_strings` is on, so backslashes are literal) and a NUL
 * character, which no Postgres text can hold, is refused before it could cut
 * the statement short.
 */

/** The text of one inlinable value, or undefined when it must stay a parameter. */
function literal(value: unknown): string | undefined {
  if (value === null || value === undefined) return "NULL";
  switch (typeof value) {
    case "string":
      return quote(value);
    case "number":
      return quote(
        Number.isFinite(value)
          ? String(value)
          : value > 0
            ? "Infinity"
            : value < 0
              ? "-Infinity"
              : "NaN",
      );
    case "bigint":
      return quote(value.toString());
    case "boolean":
      return value ? "'t'" : "'f'";
    default:
      break;
  }
  if (value instanceof Date) return quote(value.toISOString());
  if (value instanceof Uint8Array) {
    return `'\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")}'`;
  }
  return undefined;
}

/** Whether `c` can continue an unquoted identifier (then a `$` is part of it). */
function identChar(c: string | undefined): boolean {
  return c !== undefined && /[A-Za-z0-9_$\u0080-\uffff]/.test(c);
}

function quote(text: string): string {
  if (text.includes("\0")) {
    // What PostgreSQL itself raises (SQLSTATE 22021), so callers classify it alike.
    throw Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), {
      code: "22021",
      severity: "ERROR",
    });
  }
  return `'${text.replaceAll("'", "''")}'`;
}

/**
 * Where a statement's placeholders are: the text between them and, for each,
 * the index of its parameter. Scanning SQL character by character is the
 * costly part of inlining, and a service issues the same few statement
 * texts over and over (kysely compiles a query shape to the same SQL), so
 * scans are kept per statement text.
 */
interface Template {
  /** `parts.length === indexes.length + 1`. */
  parts: string[];
  indexes: number[];
}

const templates = new Map<string, Template>();
/** Statement texts whose scan is kept (the map is emptied when full). */
const TEMPLATE_LIMIT = 2000;

function templateOf(sql: string): Template {
  let template = templates.get(sql);
  if (template === undefined) {
    template = scan(sql);
    if (templates.size >= TEMPLATE_LIMIT) templates.clear();
    templates.set(sql, template);
  }
  return template;
}

/**
 * `sql` with `$1`, `$2`, … replaced by the literals of `params`, or undefined
 * when a parameter cannot be inlined (the caller then binds them). Placeholders
 * inside quoted strings, quoted identifiers, comments and dollar-quoted bodies
 * are left alone.
 */
export function inlineParameters(sql: string, params: readonly unknown[]): string | undefined {
  if (params.length === 0) return sql;
  const literals = parameterLiterals(params);
  return literals === undefined ? undefined : inlineLiterals(sql, literals);
}

/**
 * `sql` with each placeholder replaced by its literal (see
 * {@link parameterLiterals}); undefined when a placeholder has none.
 */
export function inlineLiterals(sql: string, literals: readonly string[]): string | undefined {
  if (literals.length === 0) return sql;
  const { parts, indexes } = templateOf(sql);
  let out = parts[0] as string;
  for (let i = 0; i < indexes.length; i++) {
    const text = literals[indexes[i] as number];
    if (text === undefined) return undefined;
    out += text + (parts[i + 1] as string);
  }
  return out;
}

/**
 * The literal of each parameter, in order, or undefined when one cannot be
 * inlined (see {@link inlineParameters} for which values can).
 */
export function parameterLiterals(params: readonly unknown[]): string[] | undefined {
  const literals: string[] = [];
  for (const param of params) {
    const text = literal(param);
    if (text === undefined) return undefined;
    literals.push(text);
  }
  return literals;
}

/** How many parameters `sql` refers to: its highest placeholder number (0: none). */
export function placeholderCount(sql: string): number {
  let highest = 0;
  for (const index of templateOf(sql).indexes) if (index + 1 > highest) highest = index + 1;
  return highest;
}

/** The placeholders of `sql` (see {@link inlineParameters} for what is skipped). */
function scan(sql: string): Template {
  const parts: string[] = [];
  const indexes: number[] = [];
  let from = 0;
  let at = 0;
  const n = sql.length;
  while (at < n) {
    const c = sql[at];
    if (c === "'" || c === '"') {
      // Quoted string or identifier; a doubled quote stays inside, and in an
      // E'…' string a backslash escapes the next character.
      const escapes = c === "'" && /[Ee]/.test(sql[at - 1] ?? "") && !identChar(sql[at - 2]);
      at++;
      while (at < n) {
        if (escapes && sql[at] === "\\") at += 2;
        else if (sql[at] === c) {
          if (sql[at + 1] === c) at += 2;
          else break;
        } else at++;
      }
      at++;
    } else if (c === "-" && sql[at + 1] === "-") {
      const end = sql.indexOf("\n", at);
      at = end === -1 ? n : end + 1;
    } else if (c === "/" && sql[at + 1] === "*") {
      const end = sql.indexOf("*/", at + 2);
      at = end === -1 ? n : end + 2;
    } else if (c === "$" && !identChar(sql[at - 1])) {
      const digits = /^\$(\d+)/.exec(sql.slice(at, at + 12));
      if (digits) {
        parts.push(sql.slice(from, at));
        indexes.push(Number(digits[1]) - 1);
        at += digits[0].length;
        from = at;
        continue;
      }
      const tag = /^\$[A-Za-z_][A-Za-z0-9_]*\$|^\$\$/.exec(sql.slice(at, at + 64));
      if (tag) {
        const end = sql.indexOf(tag[0], at + tag[0].length);
        at = end === -1 ? n : end + tag[0].length;
      } else at++;
    } else at++;
  }
  parts.push(sql.slice(from));
  return { parts, indexes };
}
