/**
 * The SQL of the store's widest statement, written directly instead of
 * through kysely's query builder: a session save with the transaction's
 * transcript rows, outcomes, outbox rows and task row as data-modifying CTEs
 * (see `WriteUnit.saveSessionWithTask`). It runs twice per turn, and building,
 * schema-qualifying and compiling its ~100-value tree cost more CPU than
 * running it on PGlite (measured: ~0.37 ms of builder work per statement).
 *
 * It writes what kysely would for the same rows: columns are the keys with a
 * defined value in any row, in order of first appearance; a missing or
 * undefined value is `default`; a `sql` fragment (`now()`, a lease
 * expression) is spliced in with its parameters renumbered; every other
 * value is a parameter, passed to the driver as is.
 */
import { CompiledQuery, isExpression, type Kysely, type RawBuilder } from "kysely";

/** One statement being written: its text so far and its parameters. */
export class StatementWriter<DB> {
  readonly #compiler: Kysely<DB>;
  readonly #params: unknown[] = [];
  readonly #ctes: string[] = [];

  /** `compiler` compiles `sql` fragments (no plugins needed: they name no tables). */
  constructor(compiler: Kysely<DB>) {
    this.#compiler = compiler;
  }

  /** `with name as (insert into table (…) values … returning returning)`. */
  withInsert(name: string, table: string, rows: readonly object[], returning: string): this {
    this.#ctes.push(`${quoteId(name)} as (${this.insert(table, rows, returning)})`);
    return this;
  }

  /** `with name as (update table set … where id = … returning returning)`. */
  withUpdate(
    name: string,
    table: string,
    set: object,
    id: string,
    returning: string,
    workspaceId?: string,
  ): this {
    this.#ctes.push(`${quoteId(name)} as (${this.update(table, set, id, returning, workspaceId)})`);
    return this;
  }

  /** The text of an insert of `rows` (at least one) into `table` (already quoted). */
  insert(table: string, rows: readonly object[], returning: string): string {
    if (rows.length === 0) throw new Error("an insert needs at least one row");
    const columns: string[] = [];
    const seen = new Set<string>();
    for (const row of rows) {
      for (const [column, value] of Object.entries(row)) {
        if (value !== undefined && !seen.has(column)) {
          seen.add(column);
          columns.push(column);
        }
      }
    }
    const values = rows.map((row) => {
      const record = row as Record<string, unknown>;
      return `(${columns
        .map((column) => {
          const value = record[column];
          return value === undefined ? "default" : this.value(value);
        })
        .join(", ")})`;
    });
    return `insert into ${table} (${columns.map(quoteId).join(", ")}) values ${values.join(", ")} returning ${returning}`;
  }

  /**
   * The text of `update table set … where "id" = id returning …` (and
   * `"workspace_id" = workspaceId` when given: a session's key).
   */
  update(table: string, set: object, id: string, returning: string, workspaceId?: string): string {
    const assignments = Object.entries(set)
      .filter(([, value]) => value !== undefined)
      .map(([column, value]) => `${quoteId(column)} = ${this.value(value)}`);
    if (assignments.length === 0) throw new Error("an update needs at least one column");
    const where =
      workspaceId === undefined
        ? `"id" = ${this.value(id)}`
        : `"workspace_id" = ${this.value(workspaceId)} and "id" = ${this.value(id)}`;
    return `update ${table} set ${assignments.join(", ")} where ${where} returning ${returning}`;
  }

  /** A value's SQL: its fragment for a `sql` expression, else a new parameter. */
  value(value: unknown): string {
    if (isExpression(value)) {
      const fragment = value as Partial<RawBuilder<unknown>>;
      if (typeof fragment.compile !== "function") {
        throw new Error("only sql`…` fragments can be written into this statement");
      }
      const compiled = fragment.compile(this.#compiler);
      const base = this.#params.length;
      this.#params.push(...compiled.parameters);
      return compiled.sql.replace(/\$(\d+)/g, (_, n: string) => `$${base + Number(n)}`);
    }
    this.#params.push(value);
    return `$${this.#params.length}`;
  }

  /** The whole statement: the CTEs, then `main` (written with this writer). */
  text(main: string): { sql: string; params: unknown[] } {
    const text = this.#ctes.length > 0 ? `with ${this.#ctes.join(", ")} ${main}` : main;
    return { sql: text, params: this.#params };
  }

  /** Runs the statement ({@link text}); its first row (throws when none). */
  async first<Row>(on: Kysely<DB>, main: string): Promise<Row> {
    const { sql: text, params } = this.text(main);
    const { rows } = await on.executeQuery<Row>(CompiledQuery.raw(text, params));
    const row = rows[0];
    if (row === undefined) throw new Error(`the statement returned no row: ${main.slice(0, 80)}`);
    return row;
  }
}

/** A quoted identifier (`"name"`, inner quotes doubled). */
export function quoteId(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/** A quoted schema-qualified table name. */
export function qualified(schema: string, table: string): string {
  return `${quoteId(schema)}.${quoteId(table)}`;
}
