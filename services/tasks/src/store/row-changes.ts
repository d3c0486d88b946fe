/**
 * The row changes of an owned step (`TRELLIS_TASKS_JOURNAL=owner`): what the
 * session owner decided in memory, as the inserts and updates the
 * `tasks-read-model` projector applies to the tables behind it.
 *
 * One journal entry of kind {@link ROWS_STEP} per owned step, in the same
 * append as the step's public events (an owned step appends no step record:
 * the changes hold all the projector needs, a task's Outcome included). The owner has
 * already computed every column (timestamps included, on its clock), so the
 * projector copies them instead of re-deriving rows from the step record —
 * simpler, and what makes a row's projection equal to the owner's memory.
 *
 * A batch's changes are coalesced before they are written: a task inserted
 * and updated in one batch is one insert; several updates of one row are one
 * update; inserts of one table are one insert; updates of one table that set
 * the same columns are one update (`update … from
 * json_populate_recordset(null::<table>, $1)`: the table's own row type
 * types the values). All of them, with the batch's Outcome rows, are ONE
 * statement (data-modifying CTEs). When a task takes a session's mailbox in
 * the batch, the tasks updates that release theirs must run before it (a
 * session's one running task is a unique index, checked row by row, and the
 * CTEs of a statement run in no set order): the statement's main query
 * reads those updates, so they run first, and the rest runs after it.
 */
import { timestampDate } from "@bufbuild/protobuf/wkt";
import type { Outcome } from "@trellis/contracts/tasks";
import { type ProjectionStages, writesStatement } from "@trellis/storage";
import { type QueryCreator, sql, type Transaction } from "kysely";
import { encodeMessages } from "./codec.js";
import type { TasksDatabase } from "./schema.js";

/** Journal kind of an owned step's row changes. */
export const ROWS_STEP = "tasks.step.rows";

/** One change to one row. */
export type RowChange =
  | { op: "insert"; table: "tasks" | "messages" | "task_checkpoints" | "outcomes"; values: Row }
  | {
      op: "update";
      table: "sessions" | "tasks";
      id: string;
      set: Row;
      /** A session's workspace (its key is (workspace_id, id)); absent in older journals. */
      workspaceId?: string;
    }
  | { op: "upsert"; table: "session_states"; values: Row }
  | { op: "insert_key"; table: "idempotency_keys"; values: Row };

/** Column values: strings, numbers, booleans, bigints, bytes, dates, null. */
export type Row = Record<string, unknown>;

/** An Outcome as its `outcomes` row (a finish's row change, or a step record's Outcome). */
export function outcomeRow(outcome: Outcome): Row {
  return {
    id: outcome.id,
    task_id: outcome.taskId,
    session_id: outcome.sessionId,
    workspace_id: outcome.workspaceId,
    status: outcome.status,
    summary: outcome.summary,
    messages: encodeMessages(outcome.messages),
    artifact_ids: JSON.stringify(outcome.artifactIds),
    ...(outcome.createdAt ? { created_at: timestampDate(outcome.createdAt) } : {}),
  };
}

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

const utf8 = new TextEncoder();

function encodeRowChangesText(changes: readonly RowChange[]): Uint8Array {
  // Tagged first, then stringified without a replacer: a replacer function
  // takes JSON.stringify off its fast path (about twice the CPU).
  return utf8.encode(JSON.stringify(tagged(changes)));
}

/** `value` with its bigints, bytes and dates as the tagged objects {@link decodeRowChanges} reads. */
function tagged(value: unknown): unknown {
  if (typeof value === "bigint") return { $n: value.toString() };
  if (value === null || typeof value !== "object") return value;
  if (value instanceof Uint8Array) {
    return { $b: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  }
  if (value instanceof Date) return { $t: value.toISOString() };
  if (Array.isArray(value)) return value.map(tagged);
  // Anything else with its own JSON form (none in rows today) keeps it.
  if (typeof (value as { toJSON?: unknown }).toJSON === "function") return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value)) out[key] = tagged((value as Record<string, unknown>)[key]);
  return out;
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
  workspaceId?: string;
}

/** Columns stored as jsonb: the changes carry their values as JSON text. */
const JSONB_COLUMNS: Record<Update["table"], ReadonlySet<string>> = {
  tasks: new Set(["metadata", "checkpoint", "resume_payload", "state"]),
  sessions: new Set(["metadata"]),
};

/**
 * The update of rows of one table that set the same columns: a plain update
 * for one row, else one for all, the values as a JSON array read through
 * the table's row type (so each column takes its own type). `returning`: a
 * row per row updated (a write the statement reads, to run it first).
 */
function updateRows(table: Update["table"], rows: readonly Update[], returning: boolean): Write {
  const first = rows[0] as Update;
  // Grouped by whether they name a workspace: all of them do, or none.
  const keyed = first.workspaceId !== undefined;
  if (rows.length === 1) {
    return (qc) => {
      let query = qc.updateTable(table).set(first.set).where("id", "=", first.id);
      if (keyed) query = query.where("workspace_id", "=", first.workspaceId);
      return returning ? query.returning(released) : query;
    };
  }
  const columns = Object.keys(first.set);
  const jsonb = JSONB_COLUMNS[table];
  const json = `[${rows.map((row) => rowJson(row, jsonb)).join(",")}]`;
  return (qc) => {
    let query = qc
      .updateTable(`${table} as t`)
      .from(sql`json_populate_recordset(null::${sql.table(table)}, ${json}::json)`.as("r"))
      .set((eb) => Object.fromEntries(columns.map((column) => [column, eb.ref(`r.${column}`)])))
      .whereRef("t.id", "=", "r.id");
    if (keyed) query = query.whereRef("t.workspace_id", "=", "r.workspace_id");
    return returning ? query.returning(released) : query;
  };
}

const released = sql<number>`1`.as("released");

/** One row as a JSON object whose values PostgreSQL's input functions take. */
function rowJson(row: Update, jsonb: ReadonlySet<string>): string {
  let out = `{"id":${JSON.stringify(row.id)}`;
  if (row.workspaceId !== undefined) out += `,"workspace_id":${JSON.stringify(row.workspaceId)}`;
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

/**
 * Applies changes (in journal order) to the tables of `db` (scoped to the
 * service's schema), with the batch's Outcome rows (`outcomes`, kept once
 * per task): one statement (see the module header).
 */
export async function applyRowChanges(
  changes: readonly RowChange[],
  db: Transaction<TasksDatabase>,
  outcomes: readonly Row[] = [],
): Promise<void> {
  if (changes.length === 0 && outcomes.length === 0) return;
  await withWorkspaces(changes, db);
  // biome-ignore lint/suspicious/noExplicitAny: rows were typed when the owner built them.
  await writeAll(db as Transaction<any>, planRowChanges(changes, outcomes));
}

/**
 * The writes of changes and Outcome rows, for a batch applied as one
 * statement with its claim (the projector's `writes`): the writes, or
 * stages when a task takes a mailbox another releases in the batch;
 * `undefined` when they need a read first (rows of old journals without
 * their workspace).
 */
export function rowWrites(
  changes: readonly RowChange[],
  outcomes: readonly Row[] = [],
): readonly Write[] | WriteStages | undefined {
  if (changes.some(lacksWorkspace)) return undefined;
  const stages = planRowChanges(changes, outcomes);
  return stages.first.length > 0 ? stages : stages.rest;
}

/**
 * The writes of changes (coalesced as the module header says) and Outcome
 * rows: `first` must have run before `rest` (the tasks updates releasing a
 * mailbox that a task of the batch takes; each returns a row, so the
 * statement can read it), usually empty.
 */
function planRowChanges(changes: readonly RowChange[], outcomes: readonly Row[]): WriteStages {
  const insertedTasks = new Map<string, Row>();
  const messages: Row[] = [];
  const checkpoints: Row[] = [];
  const updates = new Map<string, Update>();
  const states = new Map<string, Row>();
  const keys: Row[] = [];
  const outcomeRows = [...outcomes];
  for (const change of changes) {
    switch (change.op) {
      case "insert":
        // A copy: a later update of the batch is merged into it.
        if (change.table === "tasks")
          insertedTasks.set(String(change.values.id), { ...change.values });
        else if (change.table === "messages") messages.push(change.values);
        else if (change.table === "outcomes") outcomeRows.push(change.values);
        else checkpoints.push(change.values);
        break;
      case "update": {
        const inserted = change.table === "tasks" ? insertedTasks.get(change.id) : undefined;
        if (inserted) {
          Object.assign(inserted, change.set);
          break;
        }
        const key = JSON.stringify([change.table, change.workspaceId ?? null, change.id]);
        const earlier = updates.get(key);
        if (earlier) Object.assign(earlier.set, change.set);
        else
          updates.set(key, {
            table: change.table,
            id: change.id,
            set: { ...change.set },
            ...(change.workspaceId !== undefined ? { workspaceId: change.workspaceId } : {}),
          });
        break;
      }
      case "upsert":
        states.set(
          JSON.stringify([change.values.workspace_id, change.values.session_id]),
          change.values,
        );
        break;
      case "insert_key":
        keys.push(change.values);
        break;
    }
  }
  // Rows of one table setting the same columns share an update.
  const groups = new Map<string, { table: Update["table"]; taking: boolean; rows: Update[] }>();
  for (const update of updates.values()) {
    const taking = update.table === "tasks" && update.set.run_state === "running";
    const key = `${update.table}|${Object.keys(update.set).sort().join(",")}|${taking}|${update.workspaceId !== undefined}`;
    const group = groups.get(key);
    if (group) group.rows.push(update);
    else groups.set(key, { table: update.table, taking, rows: [update] });
  }
  const tasks = [...insertedTasks.values()];
  // One running task per session (a unique index, checked row by row, in no
  // set order within a statement): when a task takes a mailbox in this
  // batch, the tasks updates that release theirs run first.
  const taking =
    tasks.some((row) => row.run_state === "running") || [...groups.values()].some((g) => g.taking);
  const first: Write[] = [];
  const rest: Write[] = [];
  for (const { table, taking: takes, rows } of groups.values()) {
    if (taking && table === "tasks" && !takes) first.push(updateRows(table, rows, true));
    else rest.push(updateRows(table, rows, false));
  }
  if (tasks.length > 0) rest.push((qc) => qc.insertInto("tasks").values(tasks));
  if (messages.length > 0) rest.push((qc) => qc.insertInto("messages").values(messages));
  if (checkpoints.length > 0)
    rest.push((qc) => qc.insertInto("task_checkpoints").values(checkpoints));
  if (states.size > 0) {
    const values = [...states.values()];
    rest.push((qc) =>
      qc
        .insertInto("session_states")
        .values(values)
        .onConflict((oc) =>
          oc.columns(["workspace_id", "session_id"]).doUpdateSet((eb) => ({
            state: eb.ref("excluded.state"),
            task_id: eb.ref("excluded.task_id"),
            updated_at: eb.ref("excluded.updated_at"),
          })),
        ),
    );
  }
  if (keys.length > 0)
    rest.push((qc) =>
      qc
        .insertInto("idempotency_keys")
        .values(keys)
        .onConflict((oc) => oc.columns(["scope", "key"]).doNothing()),
    );
  // Exactly once already (the position moves in this transaction); the
  // conflict clause only keeps a task's first Outcome, as the store did.
  if (outcomeRows.length > 0)
    rest.push((qc) =>
      qc
        .insertInto("outcomes")
        .values(outcomeRows)
        .onConflict((oc) => oc.doNothing()),
    );
  return { first, rest };
}

/**
 * Fills the workspace of transcript and agent-state rows that journals
 * written before session ids became unique per workspace (migration
 * `2027_05_01_000_session_ids_per_workspace`) left without one: their
 * session ids were unique then, so the id finds it. Changes this process
 * encodes always carry it, so only decoded (fresh) rows are filled.
 */
async function withWorkspaces(
  changes: readonly RowChange[],
  db: Transaction<TasksDatabase>,
): Promise<void> {
  const missing = changes.filter(lacksWorkspace) as { values: Row }[];
  if (missing.length === 0) return;
  const ids = [...new Set(missing.map((c) => String(c.values.session_id)))];
  const rows = await db
    .selectFrom("sessions")
    .select(["id", "workspace_id"])
    .where("id", "in", ids)
    .orderBy("seq", "desc")
    .execute();
  // The oldest row of an id last: it wins.
  const workspaceOf = new Map(rows.map((r) => [r.id, r.workspace_id]));
  for (const change of missing) {
    change.values.workspace_id = workspaceOf.get(String(change.values.session_id)) ?? "";
  }
}

/** A transcript or agent-state row of an old journal, without its workspace. */
function lacksWorkspace(change: RowChange): boolean {
  return (change.op === "insert" && change.table === "messages") ||
    (change.op === "upsert" && change.table === "session_states")
    ? change.values.workspace_id === undefined
    : false;
}

/** One write of a batch, built on the query creator it will run in. */
// biome-ignore lint/suspicious/noExplicitAny: rows were typed when the owner built them.
type Write = (qc: QueryCreator<any>) => { execute(): Promise<unknown>; toOperationNode(): unknown };

/** Writes in two stages: every one of `first` (each returning rows) before any of `rest`. */
interface WriteStages extends ProjectionStages {
  first: Write[];
  rest: Write[];
}

/**
 * Runs writes as ONE statement (`writesStatement`: `first` before the
 * rest); a single write as itself.
 */
// biome-ignore lint/suspicious/noExplicitAny: rows were typed when the owner built them.
async function writeAll(db: Transaction<any>, stages: WriteStages): Promise<void> {
  const count = stages.first.length + stages.rest.length;
  if (count === 0) return;
  if (count === 1) {
    await ((stages.first[0] ?? stages.rest[0]) as Write)(db).execute();
    return;
  }
  await writesStatement(db, stages, [sql<number>`1`.as("written")]).execute();
}
