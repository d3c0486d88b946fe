/**
 * The row changes of an owned step (`TRELLIS_TASKS_JOURNAL=owner`): what the
 * session owner decided in memory, as the inserts and updates the
 * `tasks-read-model` projector applies to the tables behind it.
 *
 * One journal entry of kind {@link ROWS_STEP} per owned step, in the same
 * append as the step's public events and its step record. The owner has
 * already computed every column (timestamps included, on its clock), so the
 * projector copies them instead of re-deriving rows from the step record —
 * simpler, and what makes a row's projection equal to the owner's memory.
 *
 * A batch's changes are coalesced before they are written: a task inserted
 * and updated in one batch is one insert; several updates of one row are one
 * update; inserts of one table are one statement; updates of one table that
 * set the same columns are one statement (`update … from
 * json_populate_recordset(null::<table>, $1)`: the table's own row type
 * types the values). Updates go first, those that make a task running last,
 * then inserts: a session's one running task (a unique index) is released
 * before another takes the mailbox.
 */
import { sql, type Transaction } from "kysely";
import type { TasksDatabase } from "./schema.js";

/** Journal kind of an owned step's row changes. */
export const ROWS_STEP = "tasks.step.rows";

/** One change to one row. */
export type RowChange =
  | { op: "insert"; table: "tasks" | "messages" | "task_checkpoints"; values: Row }
  | { op: "update"; table: "sessions" | "tasks"; id: string; set: Row }
  | { op: "upsert"; table: "session_states"; values: Row }
  | { op: "insert_key"; table: "idempotency_keys"; values: Row };

/** Column values: strings, numbers, booleans, bigints, bytes, dates, null. */
export type Row = Record<string, unknown>;

/**
 * The changes behind the bodies this process encoded, while the bodies live:
 * the projector of this process is handed the very bodies it appended
 * (`Journal.onEntries`), so it takes the changes back without parsing them.
 * The changes are read-only once encoded ({@link applyRowChanges} copies
 * what it merges).
 */
const encoded = new WeakMap<Uint8Array, readonly RowChange[]>();

/** Encodes a step's row changes for the journal (JSON with tagged bigints, bytes and dates). */
export function encodeRowChanges(changes: readonly RowChange[]): Uint8Array {
  const body = encodeRowChangesText(changes);
  encoded.set(body, changes);
  return body;
}

function encodeRowChangesText(changes: readonly RowChange[]): Uint8Array {
  const text = JSON.stringify(changes, function (this: Record<string, unknown>, key, value) {
    const raw = this[key];
    if (typeof raw === "bigint") return { $n: raw.toString() };
    if (raw instanceof Uint8Array) return { $b: Buffer.from(raw).toString("base64") };
    if (raw instanceof Date) return { $t: raw.toISOString() };
    return value;
  });
  return new TextEncoder().encode(text);
}

/** Decodes {@link encodeRowChanges} (the changes themselves for a body this process encoded). */
export function decodeRowChanges(body: Uint8Array): readonly RowChange[] {
  const known = encoded.get(body);
  if (known) return known;
  return JSON.parse(new TextDecoder().decode(body), (_key, value) => {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      if (typeof value.$n === "string") return BigInt(value.$n);
      if (typeof value.$b === "string") return new Uint8Array(Buffer.from(value.$b, "base64"));
      if (typeof value.$t === "string") return new Date(value.$t);
    }
    return value;
  }) as RowChange[];
}

/** A coalesced update of one row. */
interface Update {
  table: "sessions" | "tasks";
  id: string;
  set: Row;
}

/** Columns stored as jsonb: the changes carry their values as JSON text. */
const JSONB_COLUMNS: Record<Update["table"], ReadonlySet<string>> = {
  tasks: new Set(["metadata", "checkpoint", "resume_payload", "state"]),
  sessions: new Set(["metadata"]),
};

/**
 * Updates rows of one table that set the same columns: one plain update for
 * one row, else one statement for all, the values as a JSON array read
 * through the table's row type (so each column takes its own type).
 */
async function updateRows(
  // biome-ignore lint/suspicious/noExplicitAny: rows were typed when the owner built them.
  db: Transaction<any>,
  table: Update["table"],
  rows: readonly Update[],
): Promise<void> {
  const first = rows[0] as Update;
  if (rows.length === 1) {
    await db.updateTable(table).set(first.set).where("id", "=", first.id).execute();
    return;
  }
  const columns = Object.keys(first.set);
  const jsonb = JSONB_COLUMNS[table];
  const json = `[${rows.map((row) => rowJson(row, jsonb)).join(",")}]`;
  await db
    .updateTable(`${table} as t`)
    .from(sql`json_populate_recordset(null::${sql.table(table)}, ${json}::json)`.as("r"))
    .set((eb) => Object.fromEntries(columns.map((column) => [column, eb.ref(`r.${column}`)])))
    .whereRef("t.id", "=", "r.id")
    .execute();
}

/** One row as a JSON object whose values PostgreSQL's input functions take. */
function rowJson(row: Update, jsonb: ReadonlySet<string>): string {
  let out = `{"id":${JSON.stringify(row.id)}`;
  for (const [column, value] of Object.entries(row.set)) {
    out += `,${JSON.stringify(column)}:`;
    if (value === null || value === undefined) out += "null";
    else if (jsonb.has(column) && typeof value === "string") out += value;
    else if (typeof value === "bigint") out += `"${value}"`;
    else if (value instanceof Uint8Array) out += `"\\\\x${Buffer.from(value).toString("hex")}"`;
    else if (value instanceof Date) out += `"${value.toISOString()}"`;
    else out += JSON.stringify(value);
  }
  return `${out}}`;
}

/** Applies changes (in journal order) to the tables of `db` (scoped to the service's schema). */
export async function applyRowChanges(
  changes: readonly RowChange[],
  db: Transaction<TasksDatabase>,
): Promise<void> {
  if (changes.length === 0) return;
  const insertedTasks = new Map<string, Row>();
  const messages: Row[] = [];
  const checkpoints: Row[] = [];
  const updates = new Map<string, Update>();
  const states = new Map<string, Row>();
  const keys: Row[] = [];
  for (const change of changes) {
    switch (change.op) {
      case "insert":
        // A copy: a later update of the batch is merged into it.
        if (change.table === "tasks")
          insertedTasks.set(String(change.values.id), { ...change.values });
        else if (change.table === "messages") messages.push(change.values);
        else checkpoints.push(change.values);
        break;
      case "update": {
        const inserted = change.table === "tasks" ? insertedTasks.get(change.id) : undefined;
        if (inserted) {
          Object.assign(inserted, change.set);
          break;
        }
        const key = `${change.table}:${change.id}`;
        const earlier = updates.get(key);
        if (earlier) Object.assign(earlier.set, change.set);
        else updates.set(key, { table: change.table, id: change.id, set: { ...change.set } });
        break;
      }
      case "upsert":
        states.set(String(change.values.session_id), change.values);
        break;
      case "insert_key":
        keys.push(change.values);
        break;
    }
  }
  // biome-ignore lint/suspicious/noExplicitAny: rows were typed when the owner built them.
  const anyDb = db as Transaction<any>;
  // One running task per session (a unique index): rows leaving the mailbox
  // first, then the ones taking it (updated, then inserted). Rows of one
  // table setting the same columns share a statement.
  const groups = new Map<string, { table: "sessions" | "tasks"; rows: Update[] }>();
  for (const update of updates.values()) {
    const taking = update.set.run_state === "running" ? 1 : 0;
    const key = `${taking}|${update.table}|${Object.keys(update.set).sort().join(",")}`;
    const group = groups.get(key);
    if (group) group.rows.push(update);
    else groups.set(key, { table: update.table, rows: [update] });
  }
  const ordered = [...groups.entries()].sort(([a], [b]) => Number(a[0]) - Number(b[0]));
  for (const [, { table, rows }] of ordered) await updateRows(anyDb, table, rows);
  if (insertedTasks.size > 0)
    await anyDb
      .insertInto("tasks")
      .values([...insertedTasks.values()])
      .execute();
  if (messages.length > 0) await anyDb.insertInto("messages").values(messages).execute();
  if (checkpoints.length > 0)
    await anyDb.insertInto("task_checkpoints").values(checkpoints).execute();
  if (states.size > 0) {
    await anyDb
      .insertInto("session_states")
      .values([...states.values()])
      .onConflict((oc) =>
        oc.column("session_id").doUpdateSet((eb) => ({
          state: eb.ref("excluded.state"),
          task_id: eb.ref("excluded.task_id"),
          updated_at: eb.ref("excluded.updated_at"),
        })),
      )
      .execute();
  }
  if (keys.length > 0)
    await anyDb
      .insertInto("idempotency_keys")
      .values(keys)
      .onConflict((oc) => oc.columns(["scope", "key"]).doNothing())
      .execute();
}
