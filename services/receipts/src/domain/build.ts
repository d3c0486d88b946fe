/**
 * Building receipt documents from what is known about a task, then sealing
 * them: chain link, hash, signature.
 *
 * Mapping choices (each documented where the spec leaves room):
 * - `lifecycle.final_state`: task COMPLETED → SUCCEEDED, FAILED → FAILED,
 *   CANCELED → CANCELED; the task status itself is kept in
 *   `metadata.trellis.task_status` (spec README: both kept, each in its place).
 * - `trust`: the agent's autonomy tier when the task started and when it
 *   ended (`suggest` when the agent could not be read, as the gateway shows
 *   an unspecified tier).
 * - `model_route`: the last `agent.model_call` of the task; without one, the
 *   backend that ran it (`{provider: "trellis", model: <backend>}`: the
 *   router's recorded placement, else the agent's backend); without that,
 *   `none/none`.
 * - `cost`: USD, summed per provider and model from `agent.model_call`:
 *   the adapter's `cost_usd`, else the tokens at the configured price
 *   (`pricing.ts`), else 0; each breakdown entry's `metadata.pricing` says
 *   which (`reported`, `price_table`, `replayed`, `unknown`, or `mixed`);
 *   zeros when nothing was reported.
 * - `replay_input`: the task's event stream as one `event_log` material whose
 *   hash is the Merkle root of its events; `byte_deterministic` for
 *   deterministic backends, `best_effort` otherwise, `unavailable` when the
 *   stream had gaps when the receipt was issued.
 * - replay tasks (`replay.*` events, `metadata.replay` markers; see
 *   `replay.ts`): the same task receipt, plus the source's event log (with
 *   the source's receipt and the cursor reached) and each override as
 *   materials, `byte_deterministic` unless a dependency was unavailable,
 *   the replay mode (exact / with_overrides / from_checkpoint) in the source
 *   material's metadata and `metadata.trellis.replay_mode`, and one
 *   `deltas[]` entry per applied override with its before / after hashes.
 * - approval receipts (subject `approval`): `final_state` SUCCEEDED when a
 *   decision (approved or denied) was recorded, FAILED on timeout, CANCELED
 *   when canceled; the decision itself is in `approvals[0]`.
 *
 * Pure: no I/O (the clock and ids come in as arguments).
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { CanonicalMembers, sha256Of } from "./canonical.js";
import type { ApprovalFact, ModelCallFact, TaskStatusName, TaskSummary } from "./facts.js";
import type { ReceiptPolicyName } from "./policy.js";
import { costAt, type PriceTable, type PricingSource, priceOf } from "./pricing.js";
import {
  type BudgetAmount,
  type FinalState,
  type ModelRef,
  type ProviderCost,
  RECEIPT_SCHEMA,
  type ReceiptDocument,
  type ReceiptIssuer,
  type ReplayMaterial,
  type Sha256,
  type TrustTier,
  type UnsignedReceipt,
} from "./receipt.js";
import { toReceiptRedaction } from "./redaction.js";
import { receiptDeltas, replayDeterminism, replayMaterials } from "./replay.js";
import { type SigningKey, signatureAlgorithm, signReceiptHash } from "./signing.js";

/** Backends whose runs replay byte for byte. */
const DETERMINISTIC_BACKENDS: ReadonlySet<string> = new Set(["scripted"]);

/** Whether a backend's runs replay byte for byte (e.g. `scripted`). */
export function isDeterministicBackend(backend: string): boolean {
  return DETERMINISTIC_BACKENDS.has(backend);
}

/** Who issues receipts (config). */
export interface IssuerInfo {
  id: string;
  name: string;
  version: string;
}

/** What is known of the agent that ran a task. */
export interface AgentProfile {
  agentId?: string;
  name?: string;
  version?: string;
  backend?: string;
  tier?: TrustTier;
  /** `metadata.autonomy_budget` of the agent, when it declares one. */
  budgetLimit?: BudgetAmount;
  /** Whether the backend replays byte for byte (e.g. `scripted`). */
  deterministic?: boolean;
  tenantId?: string;
}

/** What every receipt is issued with: its id, when, by whom and signed with which key, and where. */
export interface ReceiptIssue {
  receiptId: string;
  issuedAt: Date;
  issuer: IssuerInfo;
  keyId: string;
  workspaceId: string;
  sessionId: string;
}

/** Everything {@link buildTaskReceipt} needs. */
export interface TaskReceiptInput extends ReceiptIssue {
  summary: TaskSummary;
  /** The agent when the task started (undefined: same as at the end). */
  agentAtStart?: AgentProfile;
  agent: AgentProfile;
  policy: ReceiptPolicyName;
  /** Whether the task's stream was seen 1…n without gaps. */
  streamComplete: boolean;
  /** Merkle root of the task's stream events, when complete. */
  merkleRoot?: Sha256;
  /** False when the agent could not be read and defaults were used. */
  agentKnown?: boolean;
  /** For a replay task: the source task's receipt, when it was issued already. */
  replaySource?: { receiptId: string; receiptHash: Sha256; merkleRoot?: Sha256 };
  /** Model prices for model calls whose adapter reported no cost. */
  prices?: PriceTable;
}

const DEFAULT_TIER: TrustTier = "suggest";

/** The receipt final state of a task status. */
export function finalStateOf(status: TaskStatusName): FinalState {
  switch (status) {
    case "COMPLETED":
      return "SUCCEEDED";
    case "CANCELED":
      return "CANCELED";
    default:
      return "FAILED";
  }
}

function roundUsd(value: number): number {
  return Math.round(value * 1e9) / 1e9;
}

function issuerOf(info: IssuerInfo, keyId: string): ReceiptIssuer {
  return {
    id: info.id,
    kind: "harness",
    name: info.name,
    version: info.version,
    public_key_id: keyId,
  };
}

function personaRef(agent: AgentProfile): string | undefined {
  if (!agent.agentId) return undefined;
  return agent.version ? `${agent.agentId}@${agent.version}` : agent.agentId;
}

/** Who and where: tenant, persona, workspace, session, task, branch, trace. */
function identifiersOf(input: {
  workspaceId: string;
  sessionId: string;
  summary: TaskSummary;
  agent: AgentProfile;
}): UnsignedReceipt["identifiers"] {
  const { summary, agent } = input;
  const persona = personaRef(agent);
  return {
    ...(agent.tenantId ? { tenant_id: agent.tenantId } : {}),
    ...(persona ? { persona_ref: persona } : {}),
    workspace_ref: input.workspaceId,
    session_id: input.sessionId || "none",
    task_id: summary.taskId,
    ...(summary.branchId ? { branch_id: summary.branchId } : {}),
    ...(summary.traceId ? { trace_id: summary.traceId } : {}),
  };
}

function modelRoute(summary: TaskSummary, agent: AgentProfile): UnsignedReceipt["model_route"] {
  const last = summary.modelCalls.at(-1);
  if (last) {
    const key = (m: ModelRef) => `${m.provider}\u0000${m.model}\u0000${m.version ?? ""}`;
    const chosenKey = key(last.chosen);
    const alternatives = new Map<string, ModelRef>();
    for (const call of summary.modelCalls) {
      for (const alt of [call.chosen, ...call.alternatives]) {
        const k = key(alt);
        if (k !== chosenKey && !alternatives.has(k)) alternatives.set(k, alt);
      }
    }
    return {
      chosen_model: last.chosen,
      alternatives_considered: [...alternatives.values()],
      route_policy_reason: last.reason || "model chosen by the execution adapter",
    };
  }
  const backend = summary.backend ?? agent.backend;
  if (backend) {
    return {
      chosen_model: { provider: "trellis", model: backend },
      alternatives_considered: [],
      route_policy_reason: `agent backend ${backend} ran the task; no model call was recorded`,
    };
  }
  return {
    chosen_model: { provider: "none", model: "none" },
    alternatives_considered: [],
    route_policy_reason: "no model call was recorded",
  };
}

/** What one model call cost, and where that figure came from (see `pricing.ts`). */
function callCost(
  call: ModelCallFact,
  replay: boolean,
  prices: PriceTable | undefined,
): { usd: number; source: PricingSource; priceKey?: string } {
  if (call.costReported !== false) return { usd: call.costUsd, source: "reported" };
  if (replay) return { usd: 0, source: "replayed" };
  const priced = priceOf(prices, call.chosen.provider, call.chosen.model);
  if (!priced) return { usd: 0, source: "unknown" };
  return {
    usd: costAt(priced.price, call.inputTokens, call.outputTokens),
    source: "price_table",
    priceKey: priced.key,
  };
}

const PRICING_NOTES: Record<PricingSource, string> = {
  reported: "cost reported by the execution adapter",
  replayed: "a replay calls no provider; the tokens are the recorded ones",
  price_table: "tokens priced by TRELLIS_RECEIPT_MODEL_PRICES",
  unknown: "no price is configured for this model; its cost is not counted",
};

function costOf(summary: TaskSummary, prices: PriceTable | undefined): UnsignedReceipt["cost"] {
  const byModel = new Map<
    string,
    { entry: ProviderCost; sources: Set<PricingSource>; keys: Set<string> }
  >();
  for (const call of summary.modelCalls) {
    const key = `${call.chosen.provider}\u0000${call.chosen.model}`;
    let item = byModel.get(key);
    if (!item) {
      item = {
        entry: {
          provider: call.chosen.provider,
          model: call.chosen.model,
          amount: 0,
          input_tokens: 0,
          output_tokens: 0,
        },
        sources: new Set(),
        keys: new Set(),
      };
      byModel.set(key, item);
    }
    const cost = callCost(call, summary.replay !== undefined, prices);
    const { entry } = item;
    entry.amount = roundUsd(entry.amount + cost.usd);
    entry.input_tokens = (entry.input_tokens ?? 0) + call.inputTokens;
    entry.output_tokens = (entry.output_tokens ?? 0) + call.outputTokens;
    item.sources.add(cost.source);
    if (cost.priceKey) item.keys.add(cost.priceKey);
  }
  const breakdown = [...byModel.values()].map(({ entry, sources, keys }) => {
    const list = [...sources].sort();
    const only = list.length === 1 ? (list[0] as PricingSource) : undefined;
    entry.metadata = {
      pricing: only ?? "mixed",
      ...(only ? { pricing_note: PRICING_NOTES[only] } : { pricing_sources: list }),
      ...(keys.size > 0 ? { price_keys: [...keys].sort() } : {}),
    };
    return entry;
  });
  return {
    currency: "USD",
    total: roundUsd(breakdown.reduce((sum, p) => sum + p.amount, 0)),
    provider_breakdown: breakdown,
  };
}

function consumedBudget(summary: TaskSummary, cost: UnsignedReceipt["cost"]): BudgetAmount {
  const from = summary.startedAt ?? summary.createdAt;
  const to = summary.completedAt;
  const wall = from && to ? Math.max(0, Date.parse(to) - Date.parse(from)) : 0;
  return {
    usd: cost.total,
    input_tokens: summary.modelCalls.reduce((n, c) => n + c.inputTokens, 0),
    output_tokens: summary.modelCalls.reduce((n, c) => n + c.outputTokens, 0),
    tool_calls: summary.toolCalls.length,
    wall_time_ms: Number.isFinite(wall) ? wall : 0,
  };
}

function replayInput(input: TaskReceiptInput): UnsignedReceipt["replay_input"] {
  const replay = input.summary.replay;
  const replayed = replay ? replayMaterials(replay, input.replaySource) : undefined;
  const materials: ReplayMaterial[] = replayed ? [replayed.source] : [];
  if (input.merkleRoot) {
    materials.push({
      kind: "event_log",
      id: input.summary.taskId,
      uri: `trellis://events/task/${input.summary.taskId}`,
      sha256: input.merkleRoot,
      content_type: "application/vnd.trellis.event+json",
      metadata: {
        events: input.summary.streamHashes.length,
        root: "rfc6962-merkle-tree-hash",
        leaf: "sha256(rfc8785(proto3-json(event)))",
      },
    });
  }
  if (replayed) materials.push(...replayed.overrides);
  if (!input.streamComplete) {
    return {
      determinism: "unavailable",
      materials,
      unavailable_reason: "the task's event stream had gaps when the receipt was issued",
    };
  }
  if (replay) {
    const determinism = replayDeterminism(replay);
    return determinism.determinism === "unavailable"
      ? { determinism: "unavailable", materials, unavailable_reason: determinism.reason }
      : { determinism: determinism.determinism, materials };
  }
  // The backend that ran it decides, when the router placed it elsewhere.
  const deterministic =
    input.summary.backend !== undefined && input.summary.backend !== input.agent.backend
      ? isDeterministicBackend(input.summary.backend)
      : input.agent.deterministic;
  return {
    determinism: deterministic ? "byte_deterministic" : "best_effort",
    materials,
  };
}

/** What every receipt opens with: schema, id, subject, issuer and when, and who and where. */
function receiptHeader(
  input: ReceiptIssue & { summary: TaskSummary; agent: AgentProfile },
  subject: UnsignedReceipt["subject"],
): Pick<
  UnsignedReceipt,
  "schema" | "receipt_id" | "subject" | "issuer" | "issued_at" | "identifiers"
> {
  return {
    schema: RECEIPT_SCHEMA,
    receipt_id: input.receiptId,
    subject,
    issuer: issuerOf(input.issuer, input.keyId),
    issued_at: input.issuedAt.toISOString(),
    identifiers: identifiersOf(input),
  };
}

function jsonFailure(
  failure: Record<string, JsonValue> | undefined,
): Record<string, unknown> | null {
  return failure ? { ...failure } : null;
}

/** The unsigned receipt of a task that reached a terminal state. */
export function buildTaskReceipt(input: TaskReceiptInput): UnsignedReceipt {
  const { summary, agent } = input;
  const status = summary.status ?? "FAILED";
  const completedAt = summary.completedAt ?? input.issuedAt.toISOString();
  const startedAt = summary.startedAt ?? summary.createdAt ?? completedAt;
  const cost = costOf(summary, input.prices);
  const limit = agent.budgetLimit;
  return {
    ...receiptHeader(input, { object: "task", id: summary.taskId }),
    lifecycle: {
      ...(summary.createdAt ? { created_at: summary.createdAt } : {}),
      started_at: startedAt,
      completed_at: completedAt,
      final_state: finalStateOf(status),
      failure: status === "FAILED" ? jsonFailure(summary.failure) : null,
    },
    approvals: summary.approvals.map(({ eventId: _eventId, ...approval }) => approval),
    trust: {
      start_tier: input.agentAtStart?.tier ?? agent.tier ?? DEFAULT_TIER,
      end_tier: agent.tier ?? DEFAULT_TIER,
    },
    autonomy_budget: {
      ...(limit && Object.keys(limit).length ? { limit } : {}),
      consumed: consumedBudget(summary, cost),
    },
    replay_input: replayInput(input),
    model_route: modelRoute(summary, agent),
    cost,
    side_effects: {
      fs_writes: summary.fsWrites,
      network_egress: summary.egress,
      tool_calls: summary.toolCalls,
      a2a_handoffs: summary.handoffs,
    },
    final_artifacts: summary.artifacts,
    ...(summary.replay ? { deltas: receiptDeltas(summary.replay) } : {}),
    redactions: summary.redactions.map(toReceiptRedaction),
    metadata: {
      trellis: {
        ...(summary.replay
          ? { replay_of: summary.replay.sourceTaskId, replay_mode: summary.replay.mode }
          : {}),
        task_status: status,
        receipt_policy: input.policy,
        events: summary.events,
        event_stream_complete: input.streamComplete,
        agent_known: input.agentKnown ?? true,
        messages: summary.messages,
      },
    },
  };
}

/** Everything {@link buildApprovalReceipt} needs. */
export interface ApprovalReceiptInput extends ReceiptIssue {
  /** The approval event's id: the receipt's subject. */
  eventId: string;
  eventHash: Sha256;
  decidedAt: string;
  actor: string;
  approval: ApprovalFact;
  /** The task so far (for its identifiers and when the wait began). */
  summary: TaskSummary;
  /** When the task began waiting for this decision, if known. */
  requestedAt?: string;
  agent: AgentProfile;
  policy: ReceiptPolicyName;
}

function approvalFinalState(decision: ApprovalFact["decision"]): FinalState {
  if (decision === "timeout") return "FAILED";
  if (decision === "canceled") return "CANCELED";
  return "SUCCEEDED";
}

/** The unsigned receipt of one approval decision. */
export function buildApprovalReceipt(input: ApprovalReceiptInput): UnsignedReceipt {
  const { summary, agent, approval } = input;
  const tier = agent.tier ?? DEFAULT_TIER;
  return {
    ...receiptHeader(input, { object: "approval", id: input.eventId }),
    lifecycle: {
      ...(summary.createdAt ? { created_at: summary.createdAt } : {}),
      started_at: input.requestedAt ?? input.decidedAt,
      completed_at: input.decidedAt,
      final_state: approvalFinalState(approval.decision),
      failure: null,
    },
    approvals: [
      {
        approval_id: approval.signalId || input.eventId,
        actor: input.actor,
        action: approval.action,
        decision: approval.decision,
        decided_at: input.decidedAt,
        evidence_hash: input.eventHash,
      },
    ],
    trust: { start_tier: tier, end_tier: tier },
    autonomy_budget: { consumed: { tool_calls: 0 } },
    replay_input: {
      determinism: "best_effort",
      materials: [
        {
          kind: "event_log",
          id: input.eventId,
          uri: `trellis://events/task/${summary.taskId}/${input.eventId}`,
          sha256: input.eventHash,
          content_type: "application/vnd.trellis.event+json",
        },
      ],
    },
    model_route: {
      chosen_model: { provider: "none", model: "none" },
      alternatives_considered: [],
      route_policy_reason: "an approval decision involves no model call",
    },
    cost: { currency: "USD", total: 0, provider_breakdown: [] },
    side_effects: { fs_writes: [], network_egress: [], tool_calls: [], a2a_handoffs: [] },
    final_artifacts: [],
    redactions: [],
    metadata: {
      trellis: {
        receipt_policy: input.policy,
        ...(approval.toolCallId ? { tool_call_id: approval.toolCallId } : {}),
      },
    },
  };
}

/** A sealed receipt: the document, its hash and its stored (canonical) text. */
export interface SealedReceipt {
  document: ReceiptDocument;
  hash: Sha256;
  /** RFC 8785 canonical text of the whole document (what is stored and served). */
  text: string;
}

/**
 * Chains and signs a receipt: sets `chain` (previous hash, optional Merkle
 * root), computes `chain.receipt_hash` over the canonical form without hash
 * and signatures, signs the hash.
 */
export function sealReceipt(
  unsigned: UnsignedReceipt,
  options: {
    previousHash: Sha256 | null;
    merkleRoot?: Sha256;
    key: SigningKey;
    signedAt: Date;
  },
): SealedReceipt {
  const members = new CanonicalMembers(unsigned as unknown as Record<string, unknown>);
  const draftChain = {
    previous_receipt_hash: options.previousHash,
    ...(options.merkleRoot ? { merkle_root: options.merkleRoot } : {}),
  };
  const hash = sha256Of(members.hashText(draftChain));
  const chain = { ...draftChain, receipt_hash: hash };
  const signatures = [
    {
      key_id: options.key.keyId,
      algorithm: signatureAlgorithm,
      signature: signReceiptHash(hash, options.key),
      signed_at: options.signedAt.toISOString(),
    },
  ];
  const document: ReceiptDocument = { ...unsigned, chain, signatures };
  return { document, hash, text: members.fullText(chain, signatures) };
}
