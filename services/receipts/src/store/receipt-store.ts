/**
 * Where receipts, chain heads, task facts and signing keys are kept: the
 * port ({@link ReceiptStore}) and its PostgreSQL implementation (which also
 * runs on PGlite in embedded mode).
 *
 * Appending to a chain is optimistic: the store remembers each workspace's
 * chain head as of its last commit, seals the new receipts against it before
 * writing, and writes a batch — its events, receipts, heads and outbox rows —
 * as one statement outside any transaction (a statement is atomic: no BEGIN,
 * no COMMIT, no sequence read). Another replica having appended first makes
 * the receipts' unique keys (workspace and position, workspace and
 * predecessor, subject) fail that statement; the store then forgets what it
 * assumed, reads again and reseals. A head this store seals against is one
 * it read or committed, so those keys alone keep the chain gap-free and
 * unforked with any number of issuers, and a head that is current costs no
 * read and no lock.
 */
import type { Event } from "@trellis/contracts/core";
import type { Database, OutboxWriter } from "@trellis/storage";
import { type Kysely, type RawBuilder, sql } from "kysely";
import type { SealedReceipt } from "../domain/build.js";
import type { EventFacts, TaskEventRecord } from "../domain/facts.js";
import type { Sha256 } from "../domain/receipt.js";
import type { ReceiptRow, ReceiptsDatabase, SigningKeyRow } from "./schema.js";

/** One event of a task to record. */
export interface TaskEventInput {
  eventId: string;
  taskId: string;
  workspaceId: string;
  sessionId: string;
  position: bigint;
  kind: string;
  eventHash: Sha256;
  facts: EventFacts;
}

/** What to issue: the receipt is built once the chain head is locked. */
export interface IssueRequest {
  workspaceId: string;
  kind: "task" | "approval";
  subjectObject: string;
  subjectId: string;
  taskId: string;
  sessionId: string;
  /**
   * Builds and seals the receipt given its predecessor's hash. `issued`
   * finds a receipt of another subject that exists already or was sealed
   * earlier in the same batch attempt (e.g. a replay's source task receipt
   * issued together with the replay's).
   */
  seal(previousHash: Sha256 | null, chainIndex: bigint, issued: IssuedLookup): SealedReceipt;
  /** Events announcing the receipt, appended to the outbox in the same transaction. */
  announce?(receipt: ReceiptRow): Event[];
}

/**
 * A receipt by subject and kind among those that existed when a batch
 * attempt began (for its requested subjects) or were sealed before the one
 * asking in the same attempt; undefined otherwise (the caller may still find
 * it in the store).
 */
export type IssuedLookup = (
  kind: string,
  subjectObject: string,
  subjectId: string,
) => ReceiptRow | undefined;

/** Events to record and receipts to issue, in one transaction (see {@link ReceiptStore.commitBatch}). */
export interface BatchRequest {
  events: readonly TaskEventInput[];
  /** In chain order; at most one per subject and kind. */
  receipts: readonly IssueRequest[];
  /**
   * Look up the subjects' existing receipts before sealing (a redelivery may
   * find its receipt issued). Without it the first attempt assumes none, and
   * the subject's unique key turns an existing one into a retry that looks.
   */
  checkExisting?: boolean;
  /**
   * The facts the receipts were built from without reading the store (a
   * replica's memory): per task, how many of its recorded events, this
   * batch's aside, they counted. When the store holds another number (another
   * replica recorded some of them), nothing is written and `commitBatch`
   * throws {@link StaleFacts} naming those tasks.
   */
  facts?: readonly { taskId: string; recorded: number }[];
}

/** The result of {@link ReceiptStore.commitBatch}. */
export interface BatchResult {
  /** Receipts issued by this call, in chain order. */
  issued: ReceiptRow[];
  /** Receipts that already existed for requested subjects (nothing new issued for them). */
  existing: ReceiptRow[];
}

/** A recorded event of a task with its log position. */
export interface StoredTaskEvent extends TaskEventRecord {
  position: bigint;
}

/** The result of {@link ReceiptStore.issue}. */
export interface IssueResult {
  receipt: ReceiptRow;
  /** False when the subject already had its receipt (nothing new issued). */
  issued: boolean;
}

/** The chain around a stored receipt. */
export interface StoredChainContext {
  /** Stored hash of the receipt before it; null when it is first. */
  previousHash: string | null;
  /** Link of the receipt after it, when there is one. */
  nextPreviousHash?: string | null;
  /** Receipts of the workspace that link to the same predecessor. */
  siblings: number;
}

/** A page of receipts. */
export interface ReceiptPage {
  receipts: ReceiptRow[];
  /** Chain index to continue after, when there are more. */
  nextAfter?: bigint;
}

/** Storage of the receipts service (port). */
export interface ReceiptStore {
  /** The recorded events of a task, in log order. */
  taskEvents(taskId: string): Promise<TaskEventRecord[]>;
  /** The recorded events of several tasks (one query), each task's in log order. */
  taskEventsOf(taskIds: readonly string[]): Promise<Map<string, StoredTaskEvent[]>>;
  /**
   * Records events (idempotent by event id) and appends receipts to their
   * workspaces' chains, once per (subject, kind), announcing each through the
   * outbox — all in one transaction, or in a single statement when there is
   * no receipt to issue. Receipts whose subject already has one are not
   * issued again (reported in `existing`).
   */
  commitBatch(request: BatchRequest): Promise<BatchResult>;
  /** The receipt of a subject, if issued. */
  receiptFor(
    kind: string,
    subjectObject: string,
    subjectId: string,
  ): Promise<ReceiptRow | undefined>;
  /**
   * Appends one receipt to its workspace's chain, once per (subject, kind):
   * returns the existing receipt when there is one, else seals the new one
   * against the chain head and stores it with the new head, in one
   * transaction ({@link commitBatch} with one receipt).
   */
  issue(request: IssueRequest): Promise<IssueResult>;
  getReceipt(id: string): Promise<ReceiptRow | undefined>;
  /** Stored receipt by its hash (for the chain link of an exported receipt). */
  receiptByHash(hash: string): Promise<ReceiptRow | undefined>;
  chainContext(
    receipt: Pick<ReceiptRow, "workspace_id" | "chain_index" | "previous_receipt_hash">,
  ): Promise<StoredChainContext>;
  listTaskReceipts(taskId: string, limit: number, after?: bigint): Promise<ReceiptPage>;
  listWorkspaceReceipts(workspaceId: string, limit: number, after?: bigint): Promise<ReceiptPage>;
  /** Length and head hash of a workspace's chain. */
  chainHead(workspaceId: string): Promise<{ length: bigint; lastHash: string | null }>;
  /** Registers a public key (no-op when the key id is known). */
  savePublicKey(key: {
    keyId: string;
    algorithm: string;
    publicKeyPem: string;
    source: string;
    privateKeyPem?: string;
  }): Promise<void>;
  publicKeys(): Promise<SigningKeyRow[]>;
  /** The private key this service generated and kept in the database, if any. */
  generatedPrivateKey(): Promise<SigningKeyRow | undefined>;
}

/** Options of {@link PostgresReceiptStore}. */
export interface PostgresReceiptStoreOptions {
  database: Database<unknown>;
  /** The service's schema. */
  schema: string;
  /** The outbox `announce` events go to (its units hand them to the relay). */
  outbox: OutboxWriter;
}

/** {@link ReceiptStore} on PostgreSQL / PGlite. */
export class PostgresReceiptStore implements ReceiptStore {
  readonly #db: Kysely<ReceiptsDatabase>;
  readonly #root: Kysely<ReceiptsDatabase>;
  readonly #schema: string;
  readonly #outbox: OutboxWriter;
  /** Each workspace's chain head as of this store's last commit (or read). */
  readonly #heads = new Map<string, ChainHead>();
  /** This store's appends, one after another (replicas race optimistically; callers here queue). */
  #appending: Promise<unknown> = Promise.resolve();
  #conflicts = 0;

  constructor(options: PostgresReceiptStoreOptions) {
    this.#root = options.database.kysely as Kysely<ReceiptsDatabase>;
    this.#db = this.#root.withSchema(options.schema);
    this.#schema = options.schema;
    this.#outbox = options.outbox;
  }

  async taskEvents(taskId: string): Promise<TaskEventRecord[]> {
    const rows = await this.#db
      .selectFrom("task_events")
      .select(["event_id", "event_hash", "facts"])
      .where("task_id", "=", taskId)
      .orderBy("position")
      .orderBy("event_id")
      .execute();
    return rows.map((row) => ({
      eventId: row.event_id,
      eventHash: row.event_hash as Sha256,
      facts: (typeof row.facts === "string" ? JSON.parse(row.facts) : row.facts) as EventFacts,
    }));
  }

  async receiptFor(kind: string, subjectObject: string, subjectId: string) {
    return this.#db
      .selectFrom("receipts")
      .selectAll()
      .where("subject_object", "=", subjectObject)
      .where("subject_id", "=", subjectId)
      .where("kind", "=", kind)
      .executeTakeFirst();
  }

  /** How often an append met another issuer's and was redone (see the module comment). */
  get conflicts(): number {
    return this.#conflicts;
  }

  async taskEventsOf(taskIds: readonly string[]): Promise<Map<string, StoredTaskEvent[]>> {
    const byTask = new Map<string, StoredTaskEvent[]>();
    if (taskIds.length === 0) return byTask;
    const rows = await this.#db
      .selectFrom("task_events")
      .select(["task_id", "event_id", "event_hash", "facts", "position"])
      .where("task_id", "in", [...new Set(taskIds)])
      .orderBy("position")
      .orderBy("event_id")
      .execute();
    for (const row of rows) {
      let list = byTask.get(row.task_id);
      if (!list) {
        list = [];
        byTask.set(row.task_id, list);
      }
      list.push({
        eventId: row.event_id,
        eventHash: row.event_hash as Sha256,
        facts: (typeof row.facts === "string" ? JSON.parse(row.facts) : row.facts) as EventFacts,
        position: BigInt(row.position),
      });
    }
    return byTask;
  }

  async issue(request: IssueRequest): Promise<IssueResult> {
    const result = await this.commitBatch({ events: [], receipts: [request], checkExisting: true });
    const receipt = result.issued[0] ?? result.existing[0];
    if (!receipt) throw new Error("issuing a receipt returned no receipt");
    return { receipt, issued: result.issued.length > 0 };
  }

  async commitBatch(request: BatchRequest): Promise<BatchResult> {
    if (request.receipts.length === 0) {
      await this.#recordEvents(this.#root, request.events);
      return { issued: [], existing: [] };
    }
    const turn = this.#appending.then(() => this.#append(request));
    this.#appending = turn.catch(() => {});
    return turn;
  }

  async #append(request: BatchRequest): Promise<BatchResult> {
    let checkExisting = request.checkExisting ?? false;
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#commitOnce(request, checkExisting);
      } catch (error) {
        if (!isChainConflict(error) || attempt >= MAX_ATTEMPTS) throw error;
        this.#conflicts++;
        // Another replica moved a head or issued one of these subjects since
        // we last looked: forget the heads we assumed and look again, after a
        // short random pause so racing replicas fall out of step.
        for (const receipt of request.receipts) this.#heads.delete(receipt.workspaceId);
        checkExisting = true;
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 5 * attempt));
      }
    }
  }

  async #commitOnce(request: BatchRequest, checkExisting: boolean): Promise<BatchResult> {
    const existing = checkExisting ? await this.#existing(request.receipts) : [];
    const taken = new Set(
      existing.map((row) => subjectKey(row.kind, row.subject_object, row.subject_id)),
    );
    const toIssue = request.receipts.filter(
      (r) => !taken.has(subjectKey(r.kind, r.subjectObject, r.subjectId)),
    );
    if (toIssue.length === 0) {
      await this.#recordEvents(this.#root, request.events);
      return { issued: [], existing };
    }

    // Seal against the heads we know, before anything is written.
    const unknown = [...new Set(toIssue.map((r) => r.workspaceId))].filter(
      (w) => !this.#heads.has(w),
    );
    if (unknown.length) await this.#readHeads(unknown);
    const heads = new Map<string, ChainHead>();
    const rows: ReceiptRow[] = [];
    const announcements: Event[] = [];
    // What this attempt knows is issued: existing receipts, then each one sealed.
    const known = new Map(
      existing.map((row) => [subjectKey(row.kind, row.subject_object, row.subject_id), row]),
    );
    const issued: IssuedLookup = (kind, subjectObject, subjectId) =>
      known.get(subjectKey(kind, subjectObject, subjectId));
    for (const r of toIssue) {
      const head = heads.get(r.workspaceId) ?? this.#heads.get(r.workspaceId) ?? EMPTY_HEAD;
      const chainIndex = head.length + 1n;
      const sealed = r.seal(head.lastHash, chainIndex, issued);
      const document = sealed.document;
      const row: ReceiptRow = {
        id: document.receipt_id,
        workspace_id: r.workspaceId,
        chain_index: chainIndex,
        kind: r.kind,
        subject_object: r.subjectObject,
        subject_id: r.subjectId,
        task_id: r.taskId,
        session_id: r.sessionId,
        receipt_hash: sealed.hash,
        previous_receipt_hash: head.lastHash,
        key_id: document.signatures?.[0]?.key_id ?? "",
        final_state: document.lifecycle.final_state,
        issued_at: new Date(document.issued_at),
        document: sealed.text,
      };
      rows.push(row);
      known.set(subjectKey(row.kind, row.subject_object, row.subject_id), row);
      announcements.push(...(r.announce?.(row) ?? []));
      heads.set(r.workspaceId, { length: chainIndex, lastId: row.id, lastHash: sealed.hash });
    }

    let stale: string[];
    try {
      stale = await this.#writeBatch(request, rows, heads, announcements);
    } catch (error) {
      for (const workspace of heads.keys()) this.#heads.delete(workspace);
      throw error;
    }
    if (stale.length) throw new StaleFacts(stale);
    for (const [workspace, head] of heads) this.#remember(workspace, head);
    return { issued: rows, existing };
  }

  /**
   * The batch in one statement, outside any transaction (a statement is
   * atomic): record the events, insert the receipts, move each head to its
   * last receipt (creating it at the first) and announce them through the
   * outbox. Another issuer that appended first makes the receipts' unique
   * keys (chain position, predecessor, subject) fail the statement: the heads
   * this store sealed against are only ever ones it read or committed, so a
   * receipt at position n+1 exists only if n did — the keys alone keep the
   * chain gap-free and unforked.
   *
   * With `request.facts` the statement first checks, in its snapshot, that
   * the store holds as many events of each task (this batch's aside) as the
   * caller built its receipts from, and writes nothing when one differs.
   * Returns those tasks (empty when it wrote).
   */
  async #writeBatch(
    request: BatchRequest,
    rows: readonly ReceiptRow[],
    heads: ReadonlyMap<string, ChainHead>,
    announcements: readonly Event[],
  ): Promise<string[]> {
    const table = (name: string) => sql.id(this.#schema, name);
    const { events } = request;
    const facts = request.facts ?? [];
    const ctes = [];
    let gate: RawBuilder<unknown> | undefined;
    if (facts.length) {
      const others = events.length
        ? sql`and e.event_id not in (${sql.join(events.map((e) => e.eventId))})`
        : sql``;
      ctes.push(
        sql`expected (task_id, recorded) as (values ${sql.join(
          facts.map((f) => sql`(${f.taskId}::text, ${f.recorded}::bigint)`),
        )})`,
        sql`stale as (
          select x.task_id from expected x
           where (select count(*) from ${table("task_events")} e
                   where e.task_id = x.task_id ${others}) <> x.recorded)`,
      );
      gate = sql`not exists (select 1 from stale)`;
    }
    const where = gate ? sql` where ${gate}` : sql``;
    if (events.length) {
      ctes.push(sql`recorded as (
        insert into ${table("task_events")}
          (event_id, task_id, workspace_id, session_id, position, kind, event_hash, facts)
        select * from (values ${sql.join(
          events.map(
            (e) =>
              sql`(${e.eventId}::text, ${e.taskId}::text, ${e.workspaceId}::text,
                ${e.sessionId}::text, ${e.position}::bigint, ${e.kind}::text,
                ${e.eventHash}::text, ${JSON.stringify(e.facts)}::jsonb)`,
          ),
        )}) v${where}
        on conflict (event_id) do nothing)`);
    }
    ctes.push(
      sql`issued as (
        insert into ${table("receipts")} (id, workspace_id, chain_index, kind, subject_object,
          subject_id, task_id, session_id, receipt_hash, previous_receipt_hash, key_id,
          final_state, issued_at, document)
        select * from (values ${sql.join(
          rows.map(
            (r) =>
              sql`(${r.id}::text, ${r.workspace_id}::text, ${r.chain_index}::bigint,
                ${r.kind}::text, ${r.subject_object}::text, ${r.subject_id}::text,
                ${r.task_id}::text, ${r.session_id}::text, ${r.receipt_hash}::text,
                ${r.previous_receipt_hash}::text, ${r.key_id}::text, ${r.final_state}::text,
                ${r.issued_at}::timestamptz, ${r.document}::text)`,
          ),
        )}) v${where})`,
      sql`heads as (
        insert into ${table("chain_heads")} as h
          (workspace_id, length, last_receipt_id, last_receipt_hash)
        select * from (values ${sql.join(
          [...heads].map(
            ([workspace, head]) =>
              sql`(${workspace}::text, ${head.length}::bigint, ${head.lastId}::text,
                ${head.lastHash}::text)`,
          ),
        )}) v${where}
        on conflict (workspace_id) do update
          set length = excluded.length, last_receipt_id = excluded.last_receipt_id,
              last_receipt_hash = excluded.last_receipt_hash
          where h.length < excluded.length)`,
    );
    const outbox = announcements.length
      ? this.#outbox.fresh(announcements, { adopt: true })
      : undefined;
    if (outbox) ctes.push(outbox.ctes("announced", gate));
    const positions = outbox ? sql.raw(outbox.positions("announced")) : sql`null`;
    const stale = facts.length ? sql`(select json_agg(task_id) from stale)` : sql`null::json`;
    const result = await sql<{ stale: unknown; positions: unknown }>`
      with ${sql.join(ctes)}
      select ${stale} as stale, ${positions} as positions`.execute(this.#root);
    const row = result.rows[0];
    const staleTasks = Array.isArray(row?.stale) ? (row.stale as string[]) : [];
    if (staleTasks.length === 0) outbox?.committed(row?.positions);
    return staleTasks;
  }

  #insertEvents(events: readonly TaskEventInput[]) {
    return sql`insert into ${sql.id(this.#schema, "task_events")}
      (event_id, task_id, workspace_id, session_id, position, kind, event_hash, facts)
      values ${sql.join(
        events.map(
          (e) =>
            sql`(${e.eventId}, ${e.taskId}, ${e.workspaceId}, ${e.sessionId}, ${e.position},
              ${e.kind}, ${e.eventHash}, ${JSON.stringify(e.facts)})`,
        ),
      )}
      on conflict (event_id) do nothing`;
  }

  async #recordEvents(db: Kysely<ReceiptsDatabase>, events: readonly TaskEventInput[]) {
    if (events.length) await this.#insertEvents(events).execute(db);
  }

  async #existing(receipts: readonly IssueRequest[]): Promise<ReceiptRow[]> {
    const subjects = receipts.map((r) => sql`(${r.subjectObject}, ${r.subjectId}, ${r.kind})`);
    const result = await sql<ReceiptRow>`
      select * from ${sql.id(this.#schema, "receipts")}
       where (subject_object, subject_id, kind) in (${sql.join(subjects)})`.execute(this.#root);
    return result.rows;
  }

  async #readHeads(workspaces: readonly string[]): Promise<void> {
    const rows = await this.#db
      .selectFrom("chain_heads")
      .select(["workspace_id", "length", "last_receipt_id", "last_receipt_hash"])
      .where("workspace_id", "in", workspaces)
      .execute();
    for (const row of rows) {
      this.#remember(row.workspace_id, {
        length: BigInt(row.length),
        lastId: row.last_receipt_id,
        lastHash: (row.last_receipt_hash ?? null) as Sha256 | null,
      });
    }
    for (const workspace of workspaces) {
      if (!this.#heads.has(workspace)) this.#remember(workspace, EMPTY_HEAD);
    }
  }

  #remember(workspace: string, head: ChainHead): void {
    this.#heads.delete(workspace);
    this.#heads.set(workspace, head);
    if (this.#heads.size > MAX_CACHED_HEADS) {
      const oldest = this.#heads.keys().next().value;
      if (oldest !== undefined) this.#heads.delete(oldest);
    }
  }

  async getReceipt(id: string) {
    return this.#db.selectFrom("receipts").selectAll().where("id", "=", id).executeTakeFirst();
  }

  async receiptByHash(hash: string) {
    return this.#db
      .selectFrom("receipts")
      .selectAll()
      .where("receipt_hash", "=", hash)
      .executeTakeFirst();
  }

  async chainContext(
    receipt: Pick<ReceiptRow, "workspace_id" | "chain_index" | "previous_receipt_hash">,
  ): Promise<StoredChainContext> {
    const index = BigInt(receipt.chain_index);
    const neighbours = await this.#db
      .selectFrom("receipts")
      .select(["chain_index", "receipt_hash", "previous_receipt_hash"])
      .where("workspace_id", "=", receipt.workspace_id)
      .where("chain_index", "in", [index - 1n, index + 1n])
      .execute();
    const before = neighbours.find((n) => BigInt(n.chain_index) === index - 1n);
    const after = neighbours.find((n) => BigInt(n.chain_index) === index + 1n);
    let siblings = 1;
    if (receipt.previous_receipt_hash !== null) {
      const count = await this.#db
        .selectFrom("receipts")
        .select((eb) => eb.fn.countAll<bigint>().as("n"))
        .where("workspace_id", "=", receipt.workspace_id)
        .where("previous_receipt_hash", "=", receipt.previous_receipt_hash)
        .executeTakeFirst();
      siblings = Number(count?.n ?? 1n);
    }
    return {
      // Position 1 has no predecessor; a missing predecessor elsewhere is a
      // hole in the chain, which the link check reports.
      previousHash: index === 1n ? null : (before?.receipt_hash ?? "(missing)"),
      ...(after ? { nextPreviousHash: after.previous_receipt_hash } : {}),
      siblings,
    };
  }

  async listTaskReceipts(taskId: string, limit: number, after?: bigint): Promise<ReceiptPage> {
    let query = this.#db
      .selectFrom("receipts")
      .selectAll()
      .where("task_id", "=", taskId)
      .orderBy("chain_index")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("chain_index", ">", after);
    return page(await query.execute(), limit);
  }

  async listWorkspaceReceipts(
    workspaceId: string,
    limit: number,
    after?: bigint,
  ): Promise<ReceiptPage> {
    let query = this.#db
      .selectFrom("receipts")
      .selectAll()
      .where("workspace_id", "=", workspaceId)
      .orderBy("chain_index")
      .limit(limit + 1);
    if (after !== undefined) query = query.where("chain_index", ">", after);
    return page(await query.execute(), limit);
  }

  async chainHead(workspaceId: string) {
    const row = await this.#db
      .selectFrom("chain_heads")
      .select(["length", "last_receipt_hash"])
      .where("workspace_id", "=", workspaceId)
      .executeTakeFirst();
    return { length: row ? BigInt(row.length) : 0n, lastHash: row?.last_receipt_hash ?? null };
  }

  async savePublicKey(key: {
    keyId: string;
    algorithm: string;
    publicKeyPem: string;
    source: string;
    privateKeyPem?: string;
  }): Promise<void> {
    await this.#db
      .insertInto("signing_keys")
      .values({
        key_id: key.keyId,
        algorithm: key.algorithm,
        public_key_pem: key.publicKeyPem,
        private_key_pem: key.privateKeyPem ?? null,
        source: key.source,
      })
      .onConflict((oc) => oc.column("key_id").doNothing())
      .execute();
  }

  async publicKeys(): Promise<SigningKeyRow[]> {
    return this.#db.selectFrom("signing_keys").selectAll().orderBy("created_at").execute();
  }

  async generatedPrivateKey(): Promise<SigningKeyRow | undefined> {
    return this.#db
      .selectFrom("signing_keys")
      .selectAll()
      .where("source", "=", "generated")
      .where("private_key_pem", "is not", null)
      .orderBy("created_at")
      .executeTakeFirst();
  }
}

function page(rows: ReceiptRow[], limit: number): ReceiptPage {
  if (rows.length <= limit) return { receipts: rows };
  const receipts = rows.slice(0, limit);
  const last = receipts.at(-1) as ReceiptRow;
  return { receipts, nextAfter: BigInt(last.chain_index) };
}

/** A chain head as the store last saw it. */
interface ChainHead {
  length: bigint;
  lastId: string | null;
  lastHash: Sha256 | null;
}

const EMPTY_HEAD: ChainHead = { length: 0n, lastId: null, lastHash: null };

/** Attempts of a batch that keeps meeting other replicas' appends before giving up. */
const MAX_ATTEMPTS = 20;

/** Workspaces whose head is remembered (least recently used are forgotten). */
const MAX_CACHED_HEADS = 10_000;

/**
 * The store holds other events of these tasks than the receipts were built
 * from (another replica recorded some): nothing was written; build them
 * again from the store's facts.
 */
export class StaleFacts extends Error {
  readonly taskIds: readonly string[];
  constructor(taskIds: readonly string[]) {
    super(`the recorded facts of ${taskIds.length} task(s) changed since they were read`);
    this.name = "StaleFacts";
    this.taskIds = taskIds;
  }
}

/** Another issuer won: a unique key (position, link, subject) taken. */
function isChainConflict(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === "23505";
}

function subjectKey(kind: string, subjectObject: string, subjectId: string): string {
  return `${kind}\u0000${subjectObject}\u0000${subjectId}`;
}
