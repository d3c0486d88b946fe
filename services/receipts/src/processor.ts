/**
 * What the receipts consumer does with the events it is handed, a batch at
 * a time:
 *
 * 1. events about a task are reduced to facts and recorded (idempotent: the
 *    event id is the key), with the event's hash — except in embedded mode,
 *    where the log itself is the record (`history`, below);
 * 2. `user.tool_confirmation` issues an approval receipt;
 * 3. `task.completed` / `task.failed` / `task.canceled` issue the task's
 *    receipt from every recorded fact, following the receipt policy.
 *
 * A batch is written in one statement (no explicit transaction): its events,
 * the receipts it issues in log order, the chain heads and the
 * `receipt.issued` announcements; it is acknowledged after that commits.
 *
 * A terminal event whose task stream has gaps (an earlier event not yet
 * recorded, e.g. redelivered out of order) is handed back for a while
 * (`TRELLIS_RECEIPT_GAP_WAIT`) so the missing facts can arrive; after that the
 * receipt is issued without them, marked `determinism: unavailable` and
 * without Merkle root.
 *
 * Issuing is idempotent (one receipt per subject and kind, a unique key the
 * store checks), so redelivery after a crash between commit and ack issues
 * nothing twice.
 *
 * A task's earlier facts come from memory when this process saw the task's
 * stream from its first event: with `exclusive` (embedded mode: the only
 * consumer, so it has seen every event of such a task) as they are; as one
 * of several replicas only when the stream's sequences it saw have no hole,
 * and the batch's statement checks that the store holds no event of the task
 * that this replica did not see (another replica's: then nothing is written
 * and the batch is built again from the store). Otherwise, e.g. for tasks
 * that began before this process started, the store is read (one query per
 * batch) — or, with `history` (embedded mode: the only consumer of a log
 * that is the durable outbox), the task's events are read back from the
 * log and the store records no facts at all (`task-history.ts`).
 */
import { randomUUID } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ActorKind, type Event, EventSchema } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import type { LoggedEvent } from "@trellis/eventlog";
import type { Logger } from "@trellis/runtime";
import type { AgentDirectory, AgentFacts } from "./agents.js";
import type { ReceiptsConfig } from "./config.js";
import {
  type AgentProfile,
  buildApprovalReceipt,
  buildTaskReceipt,
  type ReceiptIssue,
  sealReceipt,
} from "./domain/build.js";
import { eventHash, isSha256, merkleRoot } from "./domain/canonical.js";
import {
  APPROVAL_EVENT_KIND,
  extractFacts,
  foldTaskFacts,
  streamIsComplete,
  taskIdOf,
  terminalStatusOf,
} from "./domain/facts.js";
import { effectivePolicy, type ReceiptPolicyName } from "./domain/policy.js";
import type { Sha256 } from "./domain/receipt.js";
import type { KeyRing } from "./keys.js";
import {
  type IssueRequest,
  type ReceiptStore,
  StaleFacts,
  type StoredTaskEvent,
  type TaskEventInput,
} from "./store/receipt-store.js";
import type { ReceiptRow } from "./store/schema.js";
import type { TaskHistory } from "./task-history.js";

/** What to do with the event once handled. */
export type Outcome = { ack: true } | { ack: false; retryInMs: number; reason: string };

/** An event handed to the processor, and how often it has been delivered (1 the first time). */
export interface Delivery extends LoggedEvent {
  deliveryCount: number;
}

/** Options of {@link ReceiptProcessor}. */
export interface ReceiptProcessorOptions {
  store: ReceiptStore;
  keys: KeyRing;
  directory: AgentDirectory;
  config: Pick<ReceiptsConfig, "issuer" | "gapWaitMs" | "prices">;
  logger: Logger;
  /**
   * This is the only consumer of the log (embedded mode): a task's facts may
   * be taken from memory (see the module comment). Default false.
   */
  exclusive?: boolean;
  /**
   * With `exclusive`: where the earlier events of a task this process did not
   * see from its start are read (embedded mode: the event log, which is
   * durable there). The store then records no facts (`task_events`): the log
   * is the history. Without it the store keeps every event's facts.
   */
  history?: TaskHistory;
  now?: () => Date;
  newReceiptId?: () => string;
}

/** How long a gapped terminal event waits between deliveries. */
const GAP_RETRY_MS = 1_000;

/** Tasks whose facts are kept in memory in exclusive mode (least recently used are dropped). */
const MAX_CACHED_TASKS = 5_000;

const ACK: Outcome = { ack: true };

/** Handles events for the receipts consumer (see the module comment). */
export class ReceiptProcessor {
  readonly #o: ReceiptProcessorOptions;
  readonly #now: () => Date;
  readonly #newId: () => string;
  /** Tasks' facts seen by this process (see the module comment). */
  readonly #tasks = new Map<string, CachedTask>();

  constructor(options: ReceiptProcessorOptions) {
    if (options.history && !options.exclusive) {
      // Replicas fence each other through the recorded facts (see the module comment).
      throw new Error("ReceiptProcessor: `history` needs `exclusive` (one consumer of the log)");
    }
    this.#o = options;
    this.#now = options.now ?? (() => new Date());
    this.#newId = options.newReceiptId ?? (() => `rcpt_${randomUUID().replaceAll("-", "")}`);
  }

  /** Handle one delivery (`deliveryCount` is 1 the first time). */
  async handle(logged: LoggedEvent, deliveryCount = 1): Promise<Outcome> {
    const [outcome] = await this.handleBatch([{ ...logged, deliveryCount }]);
    return outcome as Outcome;
  }

  /**
   * Handle deliveries in log order, committing what they record and issue
   * in one transaction; one outcome per delivery. Throws (nothing committed)
   * when the store fails.
   */
  async handleBatch(deliveries: readonly Delivery[]): Promise<Outcome[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#handleBatch(deliveries);
      } catch (error) {
        // Another replica recorded events of a task whose facts came from
        // memory: forget them; the next attempt reads the store.
        if (!(error instanceof StaleFacts) || attempt >= 3) throw error;
        for (const taskId of error.taskIds) this.#tasks.delete(taskId);
      }
    }
  }

  async #handleBatch(deliveries: readonly Delivery[]): Promise<Outcome[]> {
    const outcomes: Outcome[] = deliveries.map(() => ACK);
    const firstIndex = new Map<string, number>();
    const duplicates: [number, number][] = [];
    const recorded: Recorded[] = [];
    for (const [index, delivery] of deliveries.entries()) {
      const { event } = delivery;
      const taskId = recordedTaskOf(event);
      if (!taskId) continue;
      const first = firstIndex.get(event.id);
      if (first !== undefined) {
        duplicates.push([index, first]);
        continue;
      }
      firstIndex.set(event.id, index);
      recorded.push({
        index,
        delivery,
        taskId,
        record: await this.#record(event, taskId, delivery.position),
      });
    }

    const issuers = recorded.filter(
      (r) =>
        (r.delivery.event.kind === APPROVAL_EVENT_KIND && r.record.facts.approval) ||
        terminalStatusOf(r.delivery.event),
    );
    const { history, fenced } = issuers.length
      ? await this.#history(issuers, recorded)
      : { history: new Map<string, StoredTaskEvent[]>(), fenced: [] };
    const requests: IssueRequest[] = [];
    /** Replay task receipt requests → their source task's id. */
    const replaySources = new Map<IssueRequest, string>();
    const subjects = new Set<string>();
    const settled = new Set<string>();
    for (const issuer of issuers) {
      // What was logged up to the issuing event, whatever else this batch holds.
      const records = (history.get(issuer.taskId) ?? []).filter(
        (r) => r.position <= issuer.record.position,
      );
      const { event } = issuer.delivery;
      let request: IssueRequest | Outcome | undefined;
      if (event.kind === APPROVAL_EVENT_KIND && issuer.record.facts.approval) {
        request = await this.#approvalRequest(issuer, records);
      }
      if (terminalStatusOf(event)) {
        request = await this.#taskRequest(issuer, records);
        // Issued or not wanted: the task's facts are no longer needed in memory.
        if (!isOutcome(request) || request.ack) settled.add(issuer.taskId);
      }
      if (request === undefined) continue;
      if (isOutcome(request)) {
        outcomes[issuer.index] = request;
        continue;
      }
      const subject = `${request.kind}\u0000${request.subjectId}`;
      if (subjects.has(subject)) continue;
      subjects.add(subject);
      requests.push(request);
      const source = replaySourceOf(issuer, records);
      if (source && request.kind === "task") replaySources.set(request, source);
    }

    await this.#o.store.commitBatch({
      // With a history to read them from, facts live in memory only.
      events: this.#o.history ? [] : recorded.map(toInput),
      receipts: sourcesFirst(requests, replaySources),
      checkExisting: issuers.some((i) => i.delivery.deliveryCount > 1),
      ...(fenced.length ? { facts: fenced } : {}),
    });
    for (const r of recorded) this.#remember(r.taskId, r.record);
    for (const taskId of settled) this.#tasks.delete(taskId);
    for (const [index, first] of duplicates) outcomes[index] = outcomes[first] as Outcome;
    return outcomes;
  }

  /**
   * Every recorded event of the issuers' tasks, this batch's included, in
   * log order (position, then event id, as the store orders them); and, for
   * the tasks taken from memory as one of several replicas, what the store
   * must still hold when the batch commits (see `BatchRequest.facts`).
   */
  async #history(
    issuers: readonly Recorded[],
    batch: readonly Recorded[],
  ): Promise<{
    history: Map<string, StoredTaskEvent[]>;
    fenced: { taskId: string; recorded: number }[];
  }> {
    const taskIds = [...new Set(issuers.map((i) => i.taskId))];
    const inBatch = new Map<string, StoredTaskEvent[]>();
    for (const r of batch) {
      const list = inBatch.get(r.taskId);
      if (list) list.push(r.record);
      else inBatch.set(r.taskId, [r.record]);
    }
    const batchIds = new Set(batch.map((r) => r.record.eventId));
    const known = new Map<string, StoredTaskEvent[]>();
    const fenced: { taskId: string; recorded: number }[] = [];
    const toRead: string[] = [];
    for (const taskId of taskIds) {
      const cached = this.#tasks.get(taskId);
      const batchRecords = inBatch.get(taskId) ?? [];
      const fromStart =
        cached?.fromStart ||
        batchRecords.some((r) => r.facts.onTaskStream && r.facts.sequence === 1);
      const records = [...(cached?.records.values() ?? [])];
      if (fromStart && this.#o.exclusive) {
        known.set(taskId, records);
      } else if (fromStart && gapFree(records, batchRecords)) {
        // Seen whole by this replica as far as the task's stream tells; the
        // statement checks that no other replica recorded one more.
        known.set(taskId, records);
        fenced.push({
          taskId,
          recorded: records.filter((r) => !batchIds.has(r.eventId)).length,
        });
      } else {
        toRead.push(taskId);
      }
    }
    if (toRead.length && this.#o.history) {
      for (const taskId of toRead) known.set(taskId, await this.#fromHistory(taskId, issuers));
    } else if (toRead.length) {
      for (const [taskId, records] of await this.#o.store.taskEventsOf(toRead)) {
        known.set(taskId, records);
      }
    }
    const history = new Map<string, StoredTaskEvent[]>();
    for (const taskId of taskIds) {
      const byId = new Map<string, StoredTaskEvent>();
      for (const record of known.get(taskId) ?? []) byId.set(record.eventId, record);
      for (const record of inBatch.get(taskId) ?? []) {
        if (!byId.has(record.eventId)) byId.set(record.eventId, record);
      }
      history.set(taskId, [...byId.values()].sort(logOrder));
    }
    return { history, fenced };
  }

  /** What one event about a task contributes to its receipt. */
  async #record(event: Event, taskId: string, position: bigint): Promise<StoredTaskEvent> {
    const facts = extractFacts(event, taskId);
    // The agent's tier when the task starts (trust.start_tier).
    if (facts.status === "WORKING" && event.kind === EVENT_KIND.taskStarted) {
      const agent = await this.#o.directory.agentOfTask(
        taskId,
        agentIdOf(event),
        workspaceOf(event),
      );
      if (agent.profile.tier) facts.agentTier = agent.profile.tier;
    }
    return { eventId: event.id, eventHash: eventHash(event), facts, position };
  }

  /**
   * A task's records read back from the log (`history`), through its last
   * issuing event of the batch. A `task.started` read back takes the agent's
   * tier as it is now (the recorded facts kept it as it was).
   */
  async #fromHistory(taskId: string, issuers: readonly Recorded[]): Promise<StoredTaskEvent[]> {
    let last: Recorded | undefined;
    for (const issuer of issuers) {
      if (issuer.taskId === taskId && (!last || issuer.record.position > last.record.position))
        last = issuer;
    }
    if (!last || !this.#o.history) return [];
    const { event } = last.delivery;
    const logged = await this.#o.history.eventsOf(
      { taskId, workspaceId: event.workspaceId, sessionId: event.sessionId },
      last.record.position,
    );
    const records: StoredTaskEvent[] = [];
    for (const entry of logged) {
      if (recordedTaskOf(entry.event) !== taskId) continue;
      records.push(await this.#record(entry.event, taskId, entry.position));
    }
    return records;
  }

  #remember(taskId: string, record: StoredTaskEvent): void {
    const tasks = this.#tasks;
    let entry = tasks.get(taskId);
    if (entry) tasks.delete(taskId);
    else entry = { fromStart: false, records: new Map() };
    tasks.set(taskId, entry);
    entry.records.set(record.eventId, record);
    if (record.facts.onTaskStream && record.facts.sequence === 1) entry.fromStart = true;
    if (tasks.size > MAX_CACHED_TASKS) {
      const oldest = tasks.keys().next().value;
      if (oldest !== undefined) tasks.delete(oldest);
    }
  }

  /** The receipt policy of `agent` in its workspace, and the agent as a receipt names it (with the workspace's tenant). */
  async #policy(
    workspaceId: string,
    agent: AgentFacts,
  ): Promise<{ policy: ReceiptPolicyName; profile: AgentProfile }> {
    const workspace = await this.#o.directory.workspace(workspaceId);
    const { tenantId } = workspace;
    return {
      policy: effectivePolicy(agent.policy, workspace.policy),
      profile: { ...agent.profile, ...(tenantId ? { tenantId } : {}) },
    };
  }

  /** What every receipt is issued with, by this service's current key. */
  #issue(issuedAt: Date, workspaceId: string, sessionId: string): ReceiptIssue {
    return {
      receiptId: this.#newId(),
      issuedAt,
      issuer: this.#o.config.issuer,
      keyId: this.#o.keys.current.keyId,
      workspaceId,
      sessionId,
    };
  }

  /** The task receipt to issue for a terminal event, or what to do with the event instead. */
  async #taskRequest(
    issuer: Recorded,
    records: readonly StoredTaskEvent[],
  ): Promise<IssueRequest | Outcome> {
    const { keys, directory, logger } = this.#o;
    const { event, deliveryCount } = issuer.delivery;
    const { taskId } = issuer;
    const facts = issuer.record.facts;
    const summary = foldTaskFacts(
      taskId,
      records,
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
    const agent = await directory.agentOfTask(
      taskId,
      summary.agentId ?? agentIdOf(event),
      workspaceId,
    );
    const { policy, profile } = await this.#policy(workspaceId, agent);
    if (policy === "disabled") {
      logger.debug("receipt policy is disabled; no receipt", { task_id: taskId });
      return ACK;
    }
    const root = complete ? merkleRoot(summary.streamHashes) : undefined;
    const sourceTaskId = summary.replay?.sourceTaskId;
    // Issued in an earlier batch: from the store; issued in this one (sealed
    // before this receipt, see sourcesFirst): from the batch, at sealing.
    const storedSource = sourceTaskId
      ? await this.#o.store.receiptFor("task", "task", sourceTaskId)
      : undefined;
    return {
      workspaceId,
      kind: "task",
      subjectObject: "task",
      subjectId: taskId,
      taskId,
      sessionId: event.sessionId,
      seal: (previousHash, _chainIndex, issued) => {
        const now = this.#now();
        const sourceRow =
          storedSource ?? (sourceTaskId ? issued("task", "task", sourceTaskId) : undefined);
        const replaySource = sourceRow ? sourceReceiptOf(sourceRow) : undefined;
        const unsigned = buildTaskReceipt({
          ...this.#issue(now, workspaceId, event.sessionId),
          summary,
          ...(summary.startTier ? { agentAtStart: { ...profile, tier: summary.startTier } } : {}),
          agent: profile,
          policy,
          streamComplete: complete,
          ...(root ? { merkleRoot: root } : {}),
          agentKnown: agent.known,
          ...(replaySource ? { replaySource } : {}),
          ...(this.#o.config.prices ? { prices: this.#o.config.prices } : {}),
        });
        return sealReceipt(unsigned, {
          previousHash,
          ...(root ? { merkleRoot: root } : {}),
          key: keys.current,
          signedAt: now,
        });
      },
      announce: (row) => [issuedEvent(row)],
    };
  }

  /** The approval receipt to issue for a `user.tool_confirmation`, if any. */
  async #approvalRequest(
    issuer: Recorded,
    records: readonly StoredTaskEvent[],
  ): Promise<IssueRequest | undefined> {
    const { keys, directory } = this.#o;
    const { event } = issuer.delivery;
    const { taskId } = issuer;
    const facts = issuer.record.facts;
    const approval = facts.approval;
    if (!approval) return undefined;
    const hash: Sha256 = issuer.record.eventHash;
    const summary = foldTaskFacts(taskId, records);
    // The wait began at the task's last suspension before the decision.
    let requestedAt: string | undefined;
    for (const record of records) {
      if (record.eventId === event.id) break;
      if (
        record.facts.status === "INPUT_REQUIRED" ||
        record.facts.kind === EVENT_KIND.toolApprovalRequired
      ) {
        requestedAt = record.facts.at;
      }
    }
    const workspaceId = workspaceOf(event);
    const agent = await directory.agentOfTask(taskId, summary.agentId, workspaceId);
    const { policy, profile } = await this.#policy(workspaceId, agent);
    if (policy === "disabled") return undefined;
    return {
      workspaceId,
      kind: "approval",
      subjectObject: "approval",
      subjectId: event.id,
      taskId,
      sessionId: event.sessionId,
      seal: (previousHash) => {
        const now = this.#now();
        const unsigned = buildApprovalReceipt({
          ...this.#issue(now, workspaceId, event.sessionId),
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
    };
  }
}

/**
 * The receipt of a replay's source task as a replay's receipt references it:
 * its id, hash and Merkle root.
 */
function sourceReceiptOf(row: ReceiptRow): {
  receiptId: string;
  receiptHash: Sha256;
  merkleRoot?: Sha256;
} {
  let merkle: unknown;
  try {
    merkle = (JSON.parse(row.document) as { chain?: { merkle_root?: unknown } }).chain?.merkle_root;
  } catch {
    merkle = undefined;
  }
  return {
    receiptId: row.id,
    receiptHash: row.receipt_hash as Sha256,
    ...(isSha256(merkle) ? { merkleRoot: merkle } : {}),
  };
}

/** The source task of the replay whose terminal event `issuer` is, if it is one. */
function replaySourceOf(issuer: Recorded, records: readonly StoredTaskEvent[]): string | undefined {
  for (const record of records) {
    if (record.facts.replay?.sourceTaskId) return record.facts.replay.sourceTaskId;
  }
  return issuer.record.facts.replay?.sourceTaskId;
}

/**
 * The batch's receipt requests in chain order: log order, except that a
 * replay's source task receipt issued in the same batch is sealed before the
 * replay's (even when the source ended after the replay), so the replay's
 * receipt can reference its hash.
 */
function sourcesFirst(
  requests: readonly IssueRequest[],
  replaySources: ReadonlyMap<IssueRequest, string>,
): IssueRequest[] {
  if (replaySources.size === 0) return [...requests];
  const taskRequests = new Map<string, IssueRequest>();
  for (const request of requests) {
    if (request.kind === "task") taskRequests.set(request.subjectId, request);
  }
  const ordered: IssueRequest[] = [];
  const placed = new Set<IssueRequest>();
  const place = (request: IssueRequest, visiting: Set<IssueRequest>) => {
    if (placed.has(request) || visiting.has(request)) return;
    visiting.add(request);
    const sourceId = replaySources.get(request);
    const source = sourceId ? taskRequests.get(sourceId) : undefined;
    if (source) place(source, visiting);
    placed.add(request);
    ordered.push(request);
  };
  for (const request of requests) place(request, new Set());
  return ordered;
}

/** A task event of the batch being handled. */
interface Recorded {
  /** Its delivery's index in the batch. */
  index: number;
  delivery: Delivery;
  taskId: string;
  record: StoredTaskEvent;
}

/** A task's facts kept in memory (exclusive mode). */
interface CachedTask {
  /** Whether its stream's first event was seen by this process. */
  fromStart: boolean;
  records: Map<string, StoredTaskEvent>;
}

function toInput(r: Recorded): TaskEventInput {
  const { event, position } = r.delivery;
  return {
    eventId: event.id,
    taskId: r.taskId,
    workspaceId: workspaceOf(event),
    sessionId: event.sessionId,
    position,
    kind: event.kind,
    eventHash: r.record.eventHash,
    facts: r.record.facts,
  };
}

/**
 * Whether a task's task-stream events, remembered and in the batch, run
 * 1, 2, … without a hole (a replica that saw them all, as far as the stream
 * tells).
 */
function gapFree(
  remembered: readonly StoredTaskEvent[],
  batch: readonly StoredTaskEvent[],
): boolean {
  const sequences = new Set<number>();
  for (const r of remembered) if (r.facts.onTaskStream) sequences.add(r.facts.sequence);
  for (const r of batch) if (r.facts.onTaskStream) sequences.add(r.facts.sequence);
  for (let s = 1; s <= sequences.size; s++) if (!sequences.has(s)) return false;
  return true;
}

function logOrder(a: StoredTaskEvent, b: StoredTaskEvent): number {
  if (a.position !== b.position) return a.position < b.position ? -1 : 1;
  return a.eventId < b.eventId ? -1 : a.eventId > b.eventId ? 1 : 0;
}

function isOutcome(value: IssueRequest | Outcome): value is Outcome {
  return "ack" in value;
}

/** The task an event is recorded for: its own, except the receipts' own announcements. */
function recordedTaskOf(event: Event): string | undefined {
  if (event.kind.startsWith("receipt.")) return undefined;
  return taskIdOf(event);
}

function workspaceOf(event: Event): string {
  return event.workspaceId || "default";
}

function agentIdOf(event: Event): string | undefined {
  if (event.actor?.kind === ActorKind.AGENT && event.actor.id) return event.actor.id;
  // Status events name the task's agent when it is submitted and starts.
  const payload = event.payload?.kind;
  return payload?.case === "taskStatusChanged" && payload.value.agentId
    ? payload.value.agentId
    : undefined;
}

/**
 * `receipt.issued` (Harn v1 "Receipt and replay events"), appended in the
 * issuing transaction so every issued receipt is announced exactly once.
 */
export function issuedEvent(row: ReceiptRow): Event {
  return create(EventSchema, {
    id: `evt_${row.id}_issued`,
    kind: EVENT_KIND.receiptIssued,
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
