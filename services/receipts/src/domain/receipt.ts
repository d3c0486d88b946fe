/**
 * The receipt document (Harn receipt wire schema `receipt-2026-04-25`) as
 * TypeScript types. The JSON document is the receipt: it is what is hashed,
 * signed, stored and served. Optional members are omitted, never `undefined`
 * in a built document, so the canonical form has no surprises.
 *
 * Pure: no I/O.
 */
import { isJsonObject } from "@trellis/runtime";

/** The schema marker of every receipt Trellis issues. */
export const RECEIPT_SCHEMA = "receipt-2026-04-25";

/** Signature algorithm of Trellis receipts. */
export const SIGNATURE_ALGORITHM = "ed25519";

/** `sha256:<64 lowercase hex>`. */
export type Sha256 = `sha256:${string}`;

/** A receipt's `lifecycle.final_state` (a task COMPLETED is SUCCEEDED here). */
export type FinalState = "SUCCEEDED" | "FAILED" | "CANCELED";

/** Autonomy tier names of the wire schema. */
export type TrustTier = "shadow" | "suggest" | "act_with_approval" | "act_auto";

/** What a receipt can be about. Trellis issues `task` and `approval` receipts. */
export type SubjectObject =
  | "task"
  | "outcome"
  | "event"
  | "artifact"
  | "approval"
  | "tool_call"
  | "replay_segment";

export interface ReceiptSubject {
  object: SubjectObject;
  id: string;
}

export interface ReceiptIssuer {
  id: string;
  kind: "harness" | "host" | "agent" | "connector";
  name?: string;
  version?: string;
  public_key_id?: string;
}

export interface ReceiptIdentifiers {
  tenant_id?: string;
  persona_ref?: string;
  workspace_ref: string;
  session_id: string;
  task_id: string;
  branch_id?: string;
  trace_id?: string;
}

export interface ReceiptLifecycle {
  created_at?: string;
  started_at: string;
  completed_at: string;
  final_state: FinalState;
  failure?: Record<string, unknown> | null;
}

export interface ReceiptApproval {
  approval_id?: string;
  actor: string;
  action: string;
  decision: "approved" | "denied" | "canceled" | "timeout";
  decided_at: string;
  quorum_proof?: Record<string, unknown> | null;
  evidence_hash?: Sha256;
}

export interface BudgetAmount {
  usd?: number;
  input_tokens?: number;
  output_tokens?: number;
  tool_calls?: number;
  wall_time_ms?: number;
}

export type ReplayMaterialKind =
  | "llm_provider_response"
  | "mcp_tool_return"
  | "event_log"
  | "artifact"
  | "host_fact";

export interface ReplayMaterial {
  kind: ReplayMaterialKind;
  id?: string;
  uri?: string;
  sha256?: Sha256;
  content_type?: string;
  bytes_base64?: string;
  metadata?: Record<string, unknown>;
}

export interface ModelRef {
  provider: string;
  model: string;
  version?: string;
  reason?: string;
}

export interface ProviderCost {
  provider: string;
  model?: string;
  amount: number;
  input_tokens?: number;
  output_tokens?: number;
  metadata?: Record<string, unknown>;
}

export interface FileWrite {
  path: string;
  operation: "create" | "modify" | "delete" | "rename";
  before_sha256?: Sha256 | null;
  after_sha256?: Sha256 | null;
}

export interface NetworkEgress {
  destination: string;
  purpose: string;
  bytes_sent?: number;
  metadata?: Record<string, unknown>;
}

export interface ToolCallEffect {
  tool: string;
  call_id: string;
  status: "succeeded" | "failed" | "canceled";
  input_hash?: Sha256;
  output_hash?: Sha256;
  metadata?: Record<string, unknown>;
}

export interface A2aHandoff {
  target_agent: string;
  task_id: string;
  status: "accepted" | "rejected" | "failed" | "completed";
  receipt_id?: string;
}

export interface ArtifactRef {
  artifact_id: string;
  kind: string;
  uri?: string;
  sha256?: Sha256;
}

export interface Redaction {
  field: string;
  reason: string;
  proof_hash?: Sha256;
}

/** A replay or repair substitution applied to the receipt's subject (schema `receiptDelta`). */
export interface ReceiptDelta {
  delta_id?: string;
  operation: "add" | "replace" | "remove";
  path: string;
  override_key?: string;
  event_id?: string;
  before_sha256?: Sha256 | null;
  after_sha256?: Sha256 | null;
  artifact_id?: string;
  reason?: string;
}

export interface ReceiptSignature {
  key_id: string;
  algorithm: string;
  signature: string;
  signed_at?: string;
}

export interface ReceiptChain {
  previous_receipt_hash: Sha256 | null;
  receipt_hash: Sha256;
  merkle_root?: Sha256;
}

/** A complete receipt document (schema `receipt-2026-04-25`). */
export interface ReceiptDocument {
  schema: typeof RECEIPT_SCHEMA;
  receipt_id: string;
  subject: ReceiptSubject;
  issuer: ReceiptIssuer;
  issued_at: string;
  identifiers: ReceiptIdentifiers;
  lifecycle: ReceiptLifecycle;
  approvals?: ReceiptApproval[];
  trust: { start_tier: TrustTier; end_tier: TrustTier; policy_ref?: string };
  autonomy_budget: { limit?: BudgetAmount; consumed: BudgetAmount };
  replay_input: {
    determinism: "byte_deterministic" | "best_effort" | "unavailable";
    materials: ReplayMaterial[];
    unavailable_reason?: string;
  };
  model_route: {
    chosen_model: ModelRef;
    alternatives_considered: ModelRef[];
    route_policy_reason: string;
  };
  cost: { currency: string; total: number; provider_breakdown: ProviderCost[] };
  side_effects: {
    fs_writes: FileWrite[];
    network_egress: NetworkEgress[];
    tool_calls: ToolCallEffect[];
    a2a_handoffs: A2aHandoff[];
  };
  final_artifacts: ArtifactRef[];
  deltas?: ReceiptDelta[];
  chain: ReceiptChain;
  redactions?: Redaction[];
  signatures?: ReceiptSignature[];
  metadata?: Record<string, unknown>;
}

/** A receipt before it is chained and signed: no `chain`, no `signatures`. */
export type UnsignedReceipt = Omit<ReceiptDocument, "chain" | "signatures">;

export { isJsonObject };
