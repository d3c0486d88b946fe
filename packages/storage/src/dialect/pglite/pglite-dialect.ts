/**
 * A kysely dialect for PGlite. kysely 0.29 ships one, but 0.29 declares
 * Node ≥ 22 and Trellis runs on Node 20 (`engines`), so storage stays on
 * kysely 0.28 and brings its own: the Postgres query compiler, adapter and
 * introspector, and a driver over PGlite's single connection.
 *
 * PGlite is one connection: kysely's work on it is serialized by a mutex held
 * from acquire to release, so a transaction owns the instance until it ends
 * (as PGlite's own `transaction()` does for every other caller).
 */
import type { QueryOptions, Results } from "@electric-sql/pglite";
import {
  AbortedTransactionError,
  CompiledQuery,
  type DatabaseConnection,
  type DatabaseIntrospector,
  type Dialect,
  type DialectAdapter,
  type Driver,
  type Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type QueryCompiler,
  type QueryResult,
  type TransactionSettings,
} from "kysely";

/** What the dialect uses of a transaction of {@link PGliteClient}. */
export interface PGliteTransactionClient {
  query<T>(query: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
  rollback(): Promise<void>;
}

/** What the dialect uses of a PGlite instance (storage passes a view of one). */
export interface PGliteClient {
  readonly closed: boolean;
  query<T>(query: string, params?: unknown[], options?: QueryOptions): Promise<Results<T>>;
  transaction<T>(callback: (tx: PGliteTransactionClient) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Postgres SQL on PGlite; see the module comment. */
export class PGliteDialect implements Dialect {
  readonly #pglite: PGliteClient;

  constructor(options: { pglite: PGliteClient }) {
    this.#pglite = options.pglite;
  }

  createAdapter(): DialectAdapter {
    return new PGliteAdapter();
  }

  createDriver(): Driver {
    return new PGliteDriver(this.#pglite);
  }

  // biome-ignore lint/suspicious/noExplicitAny: kysely's Dialect signature
  createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new PostgresIntrospector(db);
  }

  createQueryCompiler(): QueryCompiler {
    return new PostgresQueryCompiler();
  }
}

class PGliteAdapter extends PostgresAdapter {
  // The migrator holds the only connection from lock to unlock: nothing else
  // can run migrations meanwhile, so no advisory lock is needed.
  override async acquireMigrationLock(): Promise<void> {}
  override async releaseMigrationLock(): Promise<void> {}
}

/** A FIFO lock: `lock()` resolves when every earlier holder has unlocked. */
class Mutex {
  #tail: Promise<void> = Promise.resolve();
  #release: (() => void)[] = [];

  async lock(): Promise<void> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => {
      release = resolve;
    });
    this.#release.push(release);
    await previous;
  }

  unlock(): void {
    this.#release.shift()?.();
  }
}

class PGliteDriver implements Driver {
  readonly #pglite: PGliteClient;
  readonly #connection: PGliteConnection;
  readonly #mutex = new Mutex();

  constructor(pglite: PGliteClient) {
    this.#pglite = pglite;
    this.#connection = new PGliteConnection(pglite);
  }

  async init(): Promise<void> {
    if (this.#pglite.closed) throw new Error("the PGlite instance is already closed");
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    await this.#mutex.lock();
    return this.#connection;
  }

  async releaseConnection(): Promise<void> {
    this.#mutex.unlock();
  }

  async beginTransaction(_: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    await this.#connection.begin(settings);
  }

  async commitTransaction(): Promise<void> {
    await this.#connection.commit();
  }

  async rollbackTransaction(): Promise<void> {
    await this.#connection.rollback();
  }

  async savepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`savepoint ${quoteIdent(name)}`));
  }

  async rollbackToSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`rollback to savepoint ${quoteIdent(name)}`));
  }

  async releaseSavepoint(connection: DatabaseConnection, name: string): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw(`release savepoint ${quoteIdent(name)}`));
  }

  async destroy(): Promise<void> {
    if (!this.#pglite.closed) await this.#pglite.close();
  }
}

function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

/**
 * The one connection. A kysely transaction runs inside PGlite's
 * `transaction()`, which locks the instance against other users of it (the
 * storage locks and notifier query PGlite directly): `begin` enters it and
 * parks the callback until `commit` or `rollback` settles it.
 */
class PGliteConnection implements DatabaseConnection {
  readonly #pglite: PGliteClient;
  #tx: PGliteTransactionClient | undefined;
  #settle: { commit: () => void; rollback: (reason: Error) => void } | undefined;
  #done: Promise<unknown> | undefined;

  constructor(pglite: PGliteClient) {
    this.#pglite = pglite;
  }

  async executeQuery<R>(compiled: CompiledQuery): Promise<QueryResult<R>> {
    const { affectedRows, rows } = await (this.#tx ?? this.#pglite).query<R>(
      compiled.sql,
      compiled.parameters as unknown[],
      { rowMode: "object" },
    );
    return {
      ...(affectedRows == null ? {} : { numAffectedRows: BigInt(affectedRows) }),
      rows: rows ?? [],
    };
  }

  // biome-ignore lint/correctness/useYield: PGlite has no cursors; kysely's interface wants a generator
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error("streaming is not supported on PGlite");
  }

  async begin(settings: TransactionSettings): Promise<void> {
    const settled = new Promise<void>((commit, rollback) => {
      this.#settle = { commit: () => commit(), rollback };
    });
    let begun!: () => void;
    const started = new Promise<void>((resolve) => {
      begun = resolve;
    });
    this.#done = this.#pglite.transaction(async (tx) => {
      this.#tx = tx;
      begun();
      await settled;
    });
    // A transaction that fails to open rejects `#done` before `begun` runs.
    await Promise.race([started, this.#done]);
    const mode = [
      settings.isolationLevel ? `isolation level ${settings.isolationLevel}` : "",
      settings.accessMode ?? "",
    ]
      .filter(Boolean)
      .join(" ");
    if (mode) await this.executeQuery(CompiledQuery.raw(`set transaction ${mode}`));
  }

  async commit(): Promise<void> {
    this.#settle?.commit();
    try {
      await this.#done;
    } catch (error) {
      // 25P02: a statement failed earlier, so the transaction could not commit.
      if ((error as { code?: unknown } | null)?.code === "25P02")
        throw Object.assign(new AbortedTransactionError(), { cause: error });
      throw error;
    } finally {
      this.#reset();
    }
  }

  async rollback(): Promise<void> {
    this.#settle?.rollback(new Error("transaction rolled back"));
    await this.#done?.catch(() => {});
    this.#reset();
  }

  #reset(): void {
    this.#tx = undefined;
    this.#settle = undefined;
    this.#done = undefined;
  }
}
