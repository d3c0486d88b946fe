/**
 * Where receipts, chain heads, task facts and signing keys are kept: the
 * port ({@link ReceiptStore}) and its PostgreSQL implementation (which also
 * runs on PGlite in embedded mode).
 */
import type { Event } from "@trellis/contracts/core";
import type { Database } from "@trellis/storage";
import { appendToOutbox } from "@trellis/storage";
import { type Kysely, sql } from "kysely";
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
  /** Builds and seals the receipt given its predecessor's hash. */
  seal(previousHash: Sha256 | null, chainIndex: bigint): SealedReceipt;
  /** Events announcing the receipt, appended to the outbox in the same transaction. */
  announce?(receipt: ReceiptRow): Event[];
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
  /** Records an event of a task; false when it was already recorded. */
  recordTaskEvent(input: TaskEventInput): Promise<boolean>;
  /** The recorded events of a task, in log order. */
  taskEvents(taskId: string): Promise<TaskEventRecord[]>;
  /** The receipt of a subject, if issued. */
  receiptFor(
    kind: string,
    subjectObject: string,
    subjectId: string,
  ): Promise<ReceiptRow | undefined>;
  /**
   * Appends a receipt to its workspace's chain, once per (subject, kind):
   * locks the chain head, returns the existing receipt when there is one,
   * else seals the new one against the head's hash and stores it with the
   * new head, in one transaction.
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
  /** The outbox `announce` events go to. */
  outboxSchema: string;
}

/** {@link ReceiptStore} on PostgreSQL / PGlite. */
export class PostgresReceiptStore implements ReceiptStore {
  readonly #db: Kysely<ReceiptsDatabase>;
  readonly #root: Kysely<ReceiptsDatabase>;
  readonly #schema: string;
  readonly #outboxSchema: string;

  constructor(options: PostgresReceiptStoreOptions) {
    this.#root = options.database.kysely as Kysely<ReceiptsDatabase>;
    this.#db = this.#root.withSchema(options.schema);
    this.#schema = options.schema;
    this.#outboxSchema = options.outboxSchema;
  }

  async recordTaskEvent(input: TaskEventInput): Promise<boolean> {
    const result = await this.#db
      .insertInto("task_events")
      .values({
        event_id: input.eventId,
        task_id: input.taskId,
        workspace_id: input.workspaceId,
        session_id: input.sessionId,
        position: input.position,
        kind: input.kind,
        event_hash: input.eventHash,
        facts: JSON.stringify(input.facts),
      })
      .onConflict((oc) => oc.column("event_id").doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n) > 0;
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

  async issue(request: IssueRequest): Promise<IssueResult> {
    return this.#root.transaction().execute(async (trx) => {
      const db = trx.withSchema(this.#schema);
      // Lock the workspace's chain head (creating it at length 0). Every
      // issuer of the workspace queues here, so the chain never forks, and
      // the head holds what the next receipt links to: no scan.
      const head = await sql<{ length: bigint; last_receipt_hash: string | null }>`
        insert into ${sql.id(this.#schema, "chain_heads")} as h (workspace_id, length)
        values (${request.workspaceId}, 0)
        on conflict (workspace_id) do update set workspace_id = h.workspace_id
        returning h.length, h.last_receipt_hash`.execute(trx);
      const current = head.rows[0];
      if (!current) throw new Error("chain head upsert returned no row");

      // Checked under the head lock: a concurrent issuer of the same subject
      // (same workspace) has committed or rolled back by now.
      const existing = await db
        .selectFrom("receipts")
        .selectAll()
        .where("subject_object", "=", request.subjectObject)
        .where("subject_id", "=", request.subjectId)
        .where("kind", "=", request.kind)
        .executeTakeFirst();
      if (existing) return { receipt: existing, issued: false };

      const chainIndex = BigInt(current.length) + 1n;
      const previousHash = (current.last_receipt_hash ?? null) as Sha256 | null;
      const sealed = request.seal(previousHash, chainIndex);
      const document = sealed.document;
      const row: ReceiptRow = {
        id: document.receipt_id,
        workspace_id: request.workspaceId,
        chain_index: chainIndex,
        kind: request.kind,
        subject_object: request.subjectObject,
        subject_id: request.subjectId,
        task_id: request.taskId,
        session_id: request.sessionId,
        receipt_hash: sealed.hash,
        previous_receipt_hash: previousHash,
        key_id: document.signatures?.[0]?.key_id ?? "",
        final_state: document.lifecycle.final_state,
        issued_at: new Date(document.issued_at),
        document: sealed.text,
      };
      await db.insertInto("receipts").values(row).execute();
      await db
        .updateTable("chain_heads")
        .set({
          length: chainIndex,
          last_receipt_id: row.id,
          last_receipt_hash: sealed.hash,
        })
        .where("workspace_id", "=", request.workspaceId)
        .execute();
      const events = request.announce?.(row) ?? [];
      if (events.length) await appendToOutbox(trx, this.#outboxSchema, events);
      return { receipt: row, issued: true };
    });
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
