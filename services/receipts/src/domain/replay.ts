/**
 * Replay tasks in receipts (Harn replay contract, "Receipt deltas" and
 * "Determinism fixture"; receipt schema `replay_input`, `deltas`).
 *
 * A replay task (one with `parent_task_id`, run by the tasks service) leaves
 * three kinds of traces in the event log, and each becomes a fact:
 * - `replay.started` on its stream: source task, mode, checkpoint, and the
 *   overrides by key, kind and hash (never their values);
 * - `metadata.replay` on every message it produced: where the message sits
 *   in the source's stream (`replay_cursor`) and, for a message an override
 *   produced, the override's before / after hashes;
 * - `replay.completed` / `replay.failed` just before the task's final event:
 *   the receipt deltas of the applied overrides and the unused override keys.
 *
 * Folded, they give a {@link ReplaySummary}; the builder turns it into
 * replay materials, a determinism class and receipt deltas. Pure: no I/O.
 *
 * A `secret:` override carries no hash of its value, only the deployment's
 * keyed fingerprint (`hmac-sha256:`): its delta has null `before_sha256` /
 * `after_sha256` (the schema's `receiptDelta` admits only `sha256:` digests
 * and no other field), and its replay material names the fingerprint in
 * `metadata.fingerprint`.
 */
import type { JsonValue } from "@bufbuild/protobuf";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { isJsonObject, isSecretFingerprint, type SecretFingerprint } from "@trellis/runtime";
import type { ReceiptDelta, ReplayMaterial, ReplayMaterialKind, Sha256 } from "./receipt.js";

type JsonObject = { [key: string]: JsonValue };

/** An override as `replay.started` lists it. */
export interface ReplayOverrideFact {
  key: string;
  kind: string;
  sha256?: Sha256;
  /** A `secret:` override: the keyed fingerprint of its value (it has no `sha256`). */
  fingerprint?: SecretFingerprint;
  visibility?: string;
}

/** One applied override (a receipt delta). */
export interface ReplayDeltaFact {
  deltaId: string;
  overrideKey: string;
  kind?: string;
  /** The source event the substituted material was recorded in. */
  eventId?: string;
  /** The material path the override replaced. */
  material?: string;
  before: Sha256 | null;
  after: Sha256 | null;
  /** A `secret:` override: the source's recorded fingerprint, if any. */
  beforeFingerprint?: SecretFingerprint;
  /** A `secret:` override: its value's fingerprint. */
  afterFingerprint?: SecretFingerprint;
  reason?: string;
}

/** What one event says about the replay its task is (stored with the event's facts). */
export interface ReplayFact {
  sourceTaskId: string;
  mode: string;
  /** From `replay.started`. */
  started?: {
    checkpointId?: string;
    checkpointEventId?: string;
    overrides: ReplayOverrideFact[];
  };
  /** From `replay.completed` / `replay.failed`. */
  ended?: {
    status: string;
    deltas: ReplayDeltaFact[];
    unusedOverrideKeys: string[];
    failureCategory?: string;
    failureMessage?: string;
  };
  /** From a replayed message: its position in the source's stream. */
  cursor?: string;
  /** From a replayed message an override produced (one per applied override). */
  delta?: ReplayDeltaFact;
  /** Further overrides applied to the same message (`more_overrides` of its marker). */
  moreDeltas?: ReplayDeltaFact[];
}

/** The replay a task is, folded from its events' {@link ReplayFact}s. */
export interface ReplaySummary {
  sourceTaskId: string;
  mode: string;
  checkpointId?: string;
  checkpointEventId?: string;
  overrides: ReplayOverrideFact[];
  /** Applied overrides, in order (from the end event, else from the messages). */
  deltas: ReplayDeltaFact[];
  unusedOverrideKeys: string[];
  /** The last source position a replayed message re-created. */
  cursor?: string;
  /** Messages that carried a replay marker. */
  replayedMessages: number;
  ended: boolean;
  status?: string;
  failureCategory?: string;
  failureMessage?: string;
}

/** Failure category of a replay that ran into unrecorded material (tasks service). */
export const REPLAY_DEPENDENCY_UNAVAILABLE = "replay_dependency_unavailable";

const SHA256 = /^sha256:[0-9a-f]{64}$/;

function text(data: JsonObject, key: string): string {
  const value = data[key];
  return typeof value === "string" ? value : "";
}

function hashOrNull(value: JsonValue | undefined): Sha256 | null {
  return typeof value === "string" && SHA256.test(value) ? (value as Sha256) : null;
}

/** `{[key]: value}` when `value` is a well-formed fingerprint, else nothing. */
function fingerprintField<K extends string>(
  key: K,
  value: JsonValue | undefined,
): { [P in K]?: SecretFingerprint } {
  return (isSecretFingerprint(value) ? { [key]: value } : {}) as {
    [P in K]?: SecretFingerprint;
  };
}

function optional<K extends string>(key: K, value: string): { [P in K]?: string } {
  return (value ? { [key]: value } : {}) as { [P in K]?: string };
}

function deltaFact(
  data: JsonObject,
  fallbackId: string,
  clean: (s: string, field: string) => string,
): ReplayDeltaFact | undefined {
  const overrideKey = text(data, "override_key");
  if (!overrideKey) return undefined;
  return {
    deltaId: text(data, "delta_id") || text(data, "receipt_delta_id") || fallbackId,
    overrideKey,
    ...optional("kind", text(data, "kind")),
    ...optional("eventId", text(data, "original_event_id") || text(data, "event_id")),
    ...optional("material", text(data, "material")),
    before: hashOrNull(data.before_sha256),
    after: hashOrNull(data.after_sha256),
    ...fingerprintField("beforeFingerprint", data.before_fingerprint),
    ...fingerprintField("afterFingerprint", data.after_fingerprint),
    ...optional("reason", clean(text(data, "reason"), "/deltas/reason")),
  };
}

/**
 * The replay fact of a `replay.started` / `replay.completed` /
 * `replay.failed` data event; undefined for any other kind. `clean` strips
 * secrets from free text (reasons, failure messages).
 */
export function replayFactOfData(
  kind: string,
  data: JsonObject,
  clean: (s: string, field: string) => string,
): ReplayFact | undefined {
  if (
    kind !== EVENT_KIND.replayStarted &&
    kind !== EVENT_KIND.replayCompleted &&
    kind !== EVENT_KIND.replayFailed
  ) {
    return undefined;
  }
  const sourceTaskId = text(data, "source_task_id");
  if (!sourceTaskId) return undefined;
  const fact: ReplayFact = { sourceTaskId, mode: text(data, "mode") || "exact" };
  if (kind === EVENT_KIND.replayStarted) {
    const overrides: ReplayOverrideFact[] = [];
    for (const entry of Array.isArray(data.overrides) ? data.overrides : []) {
      if (!isJsonObject(entry)) continue;
      const key = text(entry, "override_key");
      if (!key) continue;
      const sha = hashOrNull(entry.sha256);
      overrides.push({
        key,
        kind: text(entry, "kind") || "unknown",
        ...(sha ? { sha256: sha } : {}),
        ...fingerprintField("fingerprint", entry.fingerprint),
        ...optional("visibility", text(entry, "visibility")),
      });
    }
    fact.started = {
      ...optional("checkpointId", text(data, "checkpoint_id")),
      ...optional("checkpointEventId", text(data, "checkpoint_event_id")),
      overrides,
    };
    return fact;
  }
  const replayTaskId = text(data, "replay_task_id");
  const deltas: ReplayDeltaFact[] = [];
  for (const entry of Array.isArray(data.deltas) ? data.deltas : []) {
    if (!isJsonObject(entry)) continue;
    const key = text(entry, "override_key");
    const delta = deltaFact(entry, `${replayTaskId}:${key}`, clean);
    if (delta) deltas.push(delta);
  }
  const failure = isJsonObject(data.failure) ? data.failure : undefined;
  fact.ended = {
    status: text(data, "status") || (kind === EVENT_KIND.replayCompleted ? "COMPLETED" : "FAILED"),
    deltas,
    unusedOverrideKeys: (Array.isArray(data.unused_override_keys)
      ? data.unused_override_keys
      : []
    ).filter((k): k is string => typeof k === "string" && k !== ""),
    ...(failure ? optional("failureCategory", text(failure, "category")) : {}),
    ...(failure
      ? optional(
          "failureMessage",
          clean(text(failure, "message"), "/replay_input/unavailable_reason"),
        )
      : {}),
  };
  return fact;
}

/** The replay fact of a message's `metadata.replay` marker, if it has one. */
export function replayFactOfMarker(
  marker: JsonValue | undefined,
  clean: (s: string, field: string) => string,
): ReplayFact | undefined {
  if (!isJsonObject(marker)) return undefined;
  const sourceTaskId = text(marker, "source_task_id");
  if (!sourceTaskId) return undefined;
  const fact: ReplayFact = { sourceTaskId, mode: text(marker, "mode") || "exact" };
  const cursor = text(marker, "replay_cursor");
  if (cursor) fact.cursor = cursor;
  const override = isJsonObject(marker.override) ? marker.override : undefined;
  const key = text(marker, "override_key");
  if (override && key) {
    const delta = deltaFact(
      {
        ...override,
        override_key: key,
        receipt_delta_id: text(marker, "receipt_delta_id"),
        original_event_id: marker.original_event_id ?? null,
      },
      `${text(marker, "replay_task_id")}:${key}`,
      clean,
    );
    if (delta) fact.delta = delta;
    const more: ReplayDeltaFact[] = [];
    for (const entry of Array.isArray(marker.more_overrides) ? marker.more_overrides : []) {
      if (!isJsonObject(entry) || !isJsonObject(entry.override)) continue;
      const moreKey = text(entry, "override_key");
      const extra = deltaFact(
        {
          ...entry.override,
          override_key: moreKey,
          receipt_delta_id: text(entry, "receipt_delta_id"),
          original_event_id: marker.original_event_id ?? null,
        },
        `${text(marker, "replay_task_id")}:${moreKey}`,
        clean,
      );
      if (extra) more.push(extra);
    }
    if (more.length > 0) fact.moreDeltas = more;
  }
  return fact;
}

/** Folds a task's replay facts (in log order); undefined when the task is no replay. */
export function foldReplay(facts: readonly (ReplayFact | undefined)[]): ReplaySummary | undefined {
  let summary: ReplaySummary | undefined;
  const fromMessages: ReplayDeltaFact[] = [];
  let endDeltas: ReplayDeltaFact[] | undefined;
  for (const fact of facts) {
    if (!fact) continue;
    summary ??= {
      sourceTaskId: fact.sourceTaskId,
      mode: fact.mode,
      overrides: [],
      deltas: [],
      unusedOverrideKeys: [],
      replayedMessages: 0,
      ended: false,
    };
    if (fact.started) {
      summary.sourceTaskId = fact.sourceTaskId;
      summary.mode = fact.mode;
      if (fact.started.checkpointId) summary.checkpointId = fact.started.checkpointId;
      if (fact.started.checkpointEventId) {
        summary.checkpointEventId = fact.started.checkpointEventId;
      }
      summary.overrides = fact.started.overrides;
    }
    if (fact.ended) {
      summary.ended = true;
      summary.status = fact.ended.status;
      endDeltas = fact.ended.deltas;
      summary.unusedOverrideKeys = fact.ended.unusedOverrideKeys;
      if (fact.ended.failureCategory) summary.failureCategory = fact.ended.failureCategory;
      if (fact.ended.failureMessage) summary.failureMessage = fact.ended.failureMessage;
    }
    if (fact.cursor !== undefined || fact.delta) {
      summary.replayedMessages += 1;
      if (fact.cursor) summary.cursor = fact.cursor;
      if (fact.delta) fromMessages.push(fact.delta, ...(fact.moreDeltas ?? []));
    }
  }
  if (summary) summary.deltas = endDeltas ?? fromMessages;
  return summary;
}

/** The receipt deltas of a replay: one per applied override. */
export function receiptDeltas(replay: ReplaySummary): ReceiptDelta[] {
  return replay.deltas.map((d) => ({
    delta_id: d.deltaId,
    // A secret replaced a recorded read when the source had its fingerprint.
    operation: d.before === null && d.beforeFingerprint === undefined ? "add" : "replace",
    path: d.material || `overrides.${d.overrideKey}`,
    override_key: d.overrideKey,
    ...(d.eventId ? { event_id: d.eventId } : {}),
    before_sha256: d.before,
    after_sha256: d.after,
    ...(d.reason ? { reason: d.reason } : {}),
  }));
}

function overrideMaterialKind(key: string, kind: string): ReplayMaterialKind {
  if (key.startsWith("llm:")) return "llm_provider_response";
  if (key.startsWith("tool:")) return kind === "mcp_tool_return" ? "mcp_tool_return" : "host_fact";
  return "host_fact";
}

/**
 * The replay materials a replay task's receipt references besides its own
 * event log: the source task's event log (with the source's receipt and
 * the cursor the replay reached; listed first) and each override by key and
 * hash (listed last).
 */
export function replayMaterials(
  replay: ReplaySummary,
  source: { receiptId: string; receiptHash: Sha256; merkleRoot?: Sha256 } | undefined,
): { source: ReplayMaterial; overrides: ReplayMaterial[] } {
  const sourceMaterial: ReplayMaterial = {
    kind: "event_log",
    id: replay.sourceTaskId,
    uri: `trellis://events/task/${replay.sourceTaskId}`,
    ...(source?.merkleRoot ? { sha256: source.merkleRoot } : {}),
    content_type: "application/vnd.trellis.event+json",
    metadata: {
      role: "replay_source",
      source_task_id: replay.sourceTaskId,
      source_receipt_id: source?.receiptId ?? null,
      source_receipt_hash: source?.receiptHash ?? null,
      mode: replay.mode,
      replay_cursor: replay.cursor ?? null,
      checkpoint_id: replay.checkpointId ?? null,
      checkpoint_event_id: replay.checkpointEventId ?? null,
      replayed_messages: replay.replayedMessages,
      unused_override_keys: replay.unusedOverrideKeys,
    },
  };
  const overrides: ReplayMaterial[] = [];
  for (const override of replay.overrides) {
    overrides.push({
      kind: overrideMaterialKind(override.key, override.kind),
      id: override.key,
      ...(override.sha256 ? { sha256: override.sha256 } : {}),
      metadata: {
        role: "replay_override",
        override_key: override.key,
        override_kind: override.kind,
        ...(override.fingerprint ? { fingerprint: override.fingerprint } : {}),
        ...(override.visibility ? { visibility: override.visibility } : {}),
      },
    });
  }
  return { source: sourceMaterial, overrides };
}

/**
 * Determinism of a replay task's receipt: `unavailable` when the replay
 * could not proceed (a dependency was not recorded), else
 * `byte_deterministic` — a replay only ever used recorded material and the
 * request's hashed overrides.
 */
export function replayDeterminism(
  replay: ReplaySummary,
): { determinism: "byte_deterministic" } | { determinism: "unavailable"; reason: string } {
  if (replay.failureCategory === REPLAY_DEPENDENCY_UNAVAILABLE) {
    return {
      determinism: "unavailable",
      reason: `the replay could not proceed: ${replay.failureMessage || "a recorded dependency was unavailable"}`,
    };
  }
  return { determinism: "byte_deterministic" };
}
