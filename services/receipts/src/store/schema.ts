/**
 * The receipts service's tables (schema `receipts`), as kysely sees them.
 */
import type { Generated, Insertable, Selectable } from "kysely";

/**
 * An issued receipt. `document` is the RFC 8785 canonical text of the whole
 * receipt, kept as text (never jsonb, which would reorder keys and
 * renormalize numbers): these bytes are what is served and re-verified.
 *
 * Guards: one receipt per (subject, kind); one receipt per chain position
 * and per predecessor in a workspace (no fork); hashes are unique.
 */
export interface ReceiptTable {
  id: string;
  workspace_id: string;
  /** 1-based position in the workspace's chain. */
  chain_index: bigint;
  /** "task" or "approval". */
  kind: string;
  subject_object: string;
  subject_id: string;
  task_id: string;
  session_id: string;
  receipt_hash: string;
  /** Null for the first receipt of a workspace. */
  previous_receipt_hash: string | null;
  key_id: string;
  final_state: string;
  issued_at: Date;
  document: string;
}

/**
 * The head of a workspace's chain. Issuing locks this row (one per
 * workspace), so appends are serialized without a scan: the cost of an
 * append does not depend on the chain's length.
 */
export interface ChainHeadTable {
  workspace_id: string;
  length: bigint;
  last_receipt_id: string | null;
  last_receipt_hash: string | null;
}

/**
 * One event of a task, reduced to the facts a receipt needs (never its
 * content), with its hash for the task's Merkle root. The primary key makes
 * recording idempotent under redelivery.
 */
export interface TaskEventTable {
  event_id: string;
  task_id: string;
  workspace_id: string;
  session_id: string;
  /** The event's position in the log (orders the task's events). */
  position: bigint;
  kind: string;
  event_hash: string;
  /** `EventFacts` as JSON. */
  facts: unknown;
  recorded_at: Generated<Date>;
}

/**
 * Keys receipts are signed with, by key id: the public half of every key
 * ever used (so rotated-out keys keep verifying old receipts) and, only for
 * a key this service generated itself without a data directory, its private
 * half.
 */
export interface SigningKeyTable {
  key_id: string;
  algorithm: string;
  public_key_pem: string;
  private_key_pem: string | null;
  /** "config", "generated", "retired-config". */
  source: string;
  created_at: Generated<Date>;
}

export interface ReceiptsDatabase {
  receipts: ReceiptTable;
  chain_heads: ChainHeadTable;
  task_events: TaskEventTable;
  signing_keys: SigningKeyTable;
}

export type ReceiptRow = Selectable<ReceiptTable>;
export type NewReceiptRow = Insertable<ReceiptTable>;
export type TaskEventRow = Selectable<TaskEventTable>;
export type SigningKeyRow = Selectable<SigningKeyTable>;
