/**
 * Tables of the Harn Extended resources kept by the tasks service (branches,
 * connectors, connector deliveries; migration
 * `2026_12_28_branches_and_connectors`), same conventions as `schema.ts`.
 */
import type { Generated, Selectable } from "kysely";
import type { CreatedAt, Defaulted, IdempotencyKeyTable, Jsonb, JsonbDefault } from "./schema.js";

export interface BranchTable {
  seq: Generated<bigint>;
  id: string;
  workspace_id: string;
  /** trellis.tasks.v1.BranchKind */
  kind: number;
  base_ref: string;
  parent_branch_id: Defaulted<string>;
  parent_session_id: string;
  session_id: string;
  task_id: Defaulted<string>;
  forked_from_event_id: Defaulted<string>;
  forked_from_message_id: Defaulted<string>;
  forked_message_count: Defaulted<bigint>;
  created_by: Defaulted<string>;
  merged_into: Defaulted<string>;
  metadata: JsonbDefault;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

export interface ConnectorTable {
  seq: Generated<bigint>;
  id: string;
  workspace_id: string;
  provider: string;
  /** trellis.tasks.v1.ConnectorStatus */
  status: number;
  status_reason: Defaulted<string>;
  event_kinds: Jsonb<string[]>;
  /** trellis.tasks.v1.ConnectorDeliveryMode */
  delivery_mode: number;
  target_persona_id: Defaulted<string>;
  target_session_id: Defaulted<string>;
  metadata: JsonbDefault;
  created_at: CreatedAt;
  updated_at: CreatedAt;
}

/** Delivery states: RECEIVED (stored, not yet submitted), SUBMITTED, FAILED. */
export type DeliveryState = "RECEIVED" | "SUBMITTED" | "FAILED";

export interface ConnectorDeliveryTable {
  id: string;
  connector_id: string;
  delivery_id: string;
  workspace_id: string;
  event_kind: string;
  state: DeliveryState;
  /** The normalized message (protobuf binary). */
  input: Uint8Array;
  task_id: Defaulted<string>;
  session_id: Defaulted<string>;
  message_id: Defaulted<string>;
  failure: Defaulted<string>;
  created_at: CreatedAt;
}

export interface ExtendedDatabase {
  branches: BranchTable;
  connectors: ConnectorTable;
  connector_deliveries: ConnectorDeliveryTable;
  idempotency_keys: IdempotencyKeyTable;
}

export type BranchRow = Selectable<BranchTable>;
export type ConnectorRow = Selectable<ConnectorTable>;
export type ConnectorDeliveryRow = Selectable<ConnectorDeliveryTable>;
