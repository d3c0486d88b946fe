/**
 * What the receipts consumer does with one event:
 *
 * 1. events about a task are reduced to facts and recorded (idempotent: the
 *    event id is the key), with the event's hash;
 * 2. `user.tool_confirmation` issues an approval receipt;
 * 3. `task.completed` / `task.failed` / `task.canceled` issue the task's
 *    receipt from every recorded fact, following the receipt policy.
 *
 * A terminal event whose task stream has gaps (an earlier event not yet
 * recorded, e.g. redelivered out of order) is handed back for a while
 * (`TRELLIS_RECEIPT_GAP_WAIT`) so the missing facts can arrive; after that the
 * receipt is issued without them, marked `determinism: unavailable` and
 * without Merkle root.
 *
 * Issuing is idempotent (one receipt per subject and kind, checked under the
 * chain-head lock), so redelivery after a crash between commit and ack
 * issues nothing twice.
 */
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ActorKind, type Event, EventSchema } from "@trellis/contracts/core";
import type { LoggedEvent } from "@trellis/eventlog";
import type { Logger } from "@trellis/runtime";
import type { AgentDirectory } from "./agents.js";
import type { ReceiptsConfig } from "./config.js";
import { buildApprovalReceipt, buildTaskReceipt, sealReceipt } from "./domain/build.js";
import { eventHash, merkleRoot } from "./domain/canonical.js";
import {
  APPROVAL_EVENT_KIND,
  type EventFacts,
  extractFacts,
  foldTaskFacts,
  streamIsComplete,
  taskIdOf,
  terminalStatusOf,
} from "./domain/facts.js";
import { effectivePolicy, type ReceiptPolicyName } from "./domain/policy.js";
import type { KeyRing } from "./keys.js";
import type { ReceiptStore } from "./store/receipt-store.js";
import type { ReceiptRow } from "./store/schema.js";

/** What to do with the event once handled. */
export type Outcome = { ack: true } | { ack: false; retryInMs: number; reason: string };

/** Options of {@link ReceiptProcessor}. */
export interface ReceiptProcessorOptions {
  store: ReceiptStore;
  keys: KeyRing;
  directory: AgentDirectory;
  config: Pick<ReceiptsConfig, "issuer" | "gapWaitMs">;
  logger: Logger;
  /** Called after a receipt was committed (nudges the outbox relay). */
  onIssued?(receipt: ReceiptRow): void;
  now?: () => Date;
  newReceiptId?: () => string;
}

/** How long a gapped terminal event waits between deliveries. */
const GAP_RETRY_MS = 1_000;

const ACK: Outcome = { ack: true };

/** Handles events for the receipts consumer (see the module comment). */
export class ReceiptProcessor {
  readonly #o: ReceiptProcessorOptions;
  readonly #now: () => Date;
  readonly #newId: () => string;

  constructor(options: ReceiptProcessorOptions) {
    this.#o = options;
    this.#now = options.now ?? (() => new Date());
    this.#newId = options.newReceiptId ?? (() => `rcpt_${randomUUID().replaceAll("-", "")}`);
  }

  /** Handle one delivery (`deliveryCount` is 1 the first time). */
  async handle(logged: LoggedEvent, deliveryCount = 1): Promise<Outcome> {
    const { event } = logged;
    if (event.kind.startsWith("receipt.")) return ACK;
    const taskId = taskIdOf(event);
    if (!taskId) return ACK;
    const facts = extractFacts(event, taskId);
    // The agent's tier when the task starts (trust.start_tier).
    if (facts.status === "WORKING" && event.kind === "task.started") {
      const agent = await this.#o.directory.agentOfTask(taskId, agentIdOf(event));
      if (agent.profile.tier) facts.agentTier = agent.profile.tier;
    }
    const hash = eventHash(event);
    await this.#o.store.recordTaskEvent({
      eventId: event.id,
      taskId,
      workspaceId: workspaceOf(event),
      sessionId: event.sessionId,
      position: logged.position,
      kind: event.kind,
      eventHash: hash,
      facts,
    });
    if (event.kind === APPROVAL_EVENT_KIND && facts.approval) {
      await this.#issueApproval(event, taskId, facts, hash);
    }
    if (terminalStatusOf(event)) return this.#issueTask(event, taskId, facts, deliveryCount);
    return ACK;
  }

  async #policy(
    workspaceId: string,
    agentPolicy: ReceiptPolicyName | undefined,
  ): Promise<{ policy: ReceiptPolicyName; tenantId?: string }> {
    const workspace = await this.#o.directory.workspace(workspaceId);
    return {
      policy: effectivePolicy(agentPolicy, workspace.policy),
      ...(workspace.tenantId ? { tenantId: workspace.tenantId } : {}),
    };
  }

  async #issueTask(
    event: Event,
    taskId: string,
    facts: EventFacts,
    deliveryCount: number,
  ): Promise<Outcome> {
    const { store, keys, directory, logger } = this.#o;
    if (await store.receiptFor("task", "task", taskId)) return ACK;
    const summary = foldTaskFacts(
      taskId,
      await store.taskEvents(taskId),
      facts.onTaskStream ? { throughSequence: facts.sequence } : {},
    );
    const lastSequence = summary.sequences.at(-1);
    const complete =
      streamIsComplete(summary) && (!facts.onTaskStream || lastSequence === facts.sequence);
    const maxDeliveries = Math.max(1, Math.ceil(this.#o.config.gapWaitMs / GAP_RETRY_MS));
    if (!complete && deliveryCount < maxDeliveries) {
      return { ack: false, retryInMs: GAP_RETRY_MS, reason: "task stream has gaps" };
    }
    if (!complete) {
      logger.warn("issuing a receipt for a task whose event stream has gaps", {
        task_id: taskId,
        sequences: summary.sequences.length,
      });
    }
    const workspaceId = workspaceOf(event);
    const agent = await directory.agentOfTask(taskId, summary.agentId ?? agentIdOf(event));
    const { policy, tenantId } = await this.#policy(workspaceId, agent.policy);
    if (policy === "disabled") {
      logger.debug("receipt policy is disabled; no receipt", { task_id: taskId });
      return ACK;
    }
    const root = complete ? merkleRoot(summary.streamHashes) : undefined;
    const profile = { ...agent.profile, ...(tenantId ? { tenantId } : {}) };
    const result = await store.issue({
      workspaceId,
      kind: "task",
      subjectObject: "task",
      subjectId: taskId,
      taskId,
      sessionId: event.sessionId,
      seal: (previousHash) => {
        const now = this.#now();
        const unsigned = buildTaskReceipt({
          receiptId: this.#newId(),
          issuedAt: now,
          issuer: this.#o.config.issuer,
          keyId: keys.current.keyId,
          workspaceId,
          sessionId: event.sessionId,
          summary,
          ...(summary.startTier ? { agentAtStart: { ...profile, tier: summary.startTier } } : {}),
          agent: profile,
          policy,
          streamComplete: complete,
          ...(root ? { merkleRoot: root } : {}),
          agentKnown: agent.known,
        });
        return sealReceipt(unsigned, {
          previousHash,
          ...(root ? { merkleRoot: root } : {}),
          key: keys.current,
          signedAt: now,
        });
      },
      announce: (row) => [issuedEvent(row)],
    });
    if (result.issued) this.#o.onIssued?.(result.receipt);
    return ACK;
  }

  async #issueApproval(event: Event, taskId: string, facts: EventFacts, hash: `sha256:${string}`) {
    const { store, keys, directory } = this.#o;
    const approval = facts.approval;
    if (!approval) return;
    if (await store.receiptFor("approval", "approval", event.id)) return;
    const records = await store.taskEvents(taskId);
    const summary = foldTaskFacts(taskId, records);
    // The wait began at the task's last suspension before the decision.
    let requestedAt: string | undefined;
    for (const record of records) {
      if (record.eventId === event.id) break;
      if (
        record.facts.status === "INPUT_REQUIRED" ||
        record.facts.kind === "tool.approval_required"
      ) {
        requestedAt = record.facts.at;
      }
    }
    const workspaceId = workspaceOf(event);
    const agent = await directory.agentOfTask(taskId, summary.agentId);
    const { policy, tenantId } = await this.#policy(workspaceId, agent.policy);
    if (policy === "disabled") return;
    const profile = { ...agent.profile, ...(tenantId ? { tenantId } : {}) };
    const result = await store.issue({
      workspaceId,
      kind: "approval",
      subjectObject: "approval",
      subjectId: event.id,
      taskId,
      sessionId: event.sessionId,
      seal: (previousHash) => {
        const now = this.#now();
        const unsigned = buildApprovalReceipt({
          receiptId: this.#newId(),
          issuedAt: now,
          issuer: this.#o.config.issuer,
          keyId: keys.current.keyId,
          workspaceId,
          sessionId: event.sessionId,
          eventId: event.id,
          eventHash: hash,
          decidedAt: facts.at,
          actor: facts.actor?.id ?? "unknown",
          approval,
          summary,
          ...(requestedAt ? { requestedAt } : {}),
          agent: profile,
          policy,
        });
        return sealReceipt(unsigned, { previousHash, key: keys.current, signedAt: now });
      },
      announce: (row) => [issuedEvent(row)],
    });
    if (result.issued) this.#o.onIssued?.(result.receipt);
  }
}

function workspaceOf(event: Event): string {
  return event.workspaceId || "default";
}

function agentIdOf(event: Event): string | undefined {
  return event.actor?.kind === ActorKind.AGENT && event.actor.id ? event.actor.id : undefined;
}

/**
 * `receipt.issued` (Harn v1 "Receipt and replay events"), appended in the
 * issuing transaction so every issued receipt is announced exactly once.
 */
export function issuedEvent(row: ReceiptRow): Event {
  return create(EventSchema, {
    id: `evt_${row.id}_issued`,
    kind: "receipt.issued",
    resource: { object: "receipt", id: row.id },
    workspaceId: row.workspace_id,
    sessionId: row.session_id,
    taskId: row.task_id,
    receiptId: row.id,
    actor: { id: "receipts", kind: ActorKind.SERVICE, displayName: "trellis receipts" },
    payload: {
      kind: {
        case: "data",
        value: {
          receipt_id: row.id,
          subject: { object: row.subject_object, id: row.subject_id },
          receipt_hash: row.receipt_hash,
          previous_receipt_hash: row.previous_receipt_hash,
          chain_index: Number(row.chain_index),
          key_id: row.key_id,
          final_state: row.final_state,
        },
      },
    },
  });
}
