/**
 * The receipts tables on a database of a test or benchmark: an in-memory
 * PGlite database, the receipts migrations (with the outbox the store
 * announces through) in a schema, and a store on them.
 */
import {
  createDatabase,
  createOutboxWriter,
  type Database,
  migrate,
  openPGlite,
  outboxMigrations,
} from "@trellis/storage";
import { receiptsMigrations } from "../store/migrations/index.js";
import { PostgresReceiptStore } from "../store/receipt-store.js";

/** The PGlite instance under a database (what `openPGlite` opens). */
export type PGliteInstance = Awaited<ReturnType<typeof openPGlite>>;

/** An in-memory PGlite database. */
export interface PGliteDatabase {
  pglite: PGliteInstance;
  db: Database<unknown>;
  /** Closes the database, then PGlite. */
  close(): Promise<void>;
}

/** An in-memory PGlite database with the receipts tables in schema `receipts`. */
export interface ReceiptsPGlite extends PGliteDatabase {
  /** A store on those tables. */
  store: PostgresReceiptStore;
}

/** Opens an in-memory PGlite database, without tables. */
export async function openPGliteDatabase(): Promise<PGliteDatabase> {
  const pglite = await openPGlite({});
  const db = await createDatabase({ kind: "pglite", pglite });
  return {
    pglite,
    db,
    async close() {
      await db.close();
      await pglite.close();
    },
  };
}

/** Creates the receipts tables, and the outbox's, in `schema` of `db`. */
export async function migrateReceipts(db: Database<unknown>, schema = "receipts"): Promise<void> {
  await migrate(db, { schema, migrations: { ...outboxMigrations(schema), ...receiptsMigrations } });
}

/**
 * A store on the receipts tables in `schema` of `db`. Each call makes another
 * store on the same tables, as another replica has.
 */
export function receiptStoreOn(db: Database<unknown>, schema = "receipts"): PostgresReceiptStore {
  return new PostgresReceiptStore({ database: db, schema, outbox: createOutboxWriter({ schema }) });
}

/** Opens an in-memory PGlite database with the receipts tables in schema `receipts`, and a store on them. */
export async function openReceiptsPGlite(): Promise<ReceiptsPGlite> {
  const opened = await openPGliteDatabase();
  await migrateReceipts(opened.db);
  return { ...opened, store: receiptStoreOn(opened.db) };
}
