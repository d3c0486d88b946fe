/**
 * Replay rules (Harn replay contract, "Modes", "Override keys", "EventLog
 * use", "Receipt deltas"). Pure: no I/O.
 *
 * A replay is a new task whose `parent_task_id` is the source task. It runs
 * in a new session forked from the source's just before the source's input
 * (or, `from_checkpoint`, at one of the source's suspensions), so the two
 * transcripts can be compared message for message.
 *
 * What a replay may use is frozen when it is created, in a {@link ReplayPlan}:
 * the source's recorded output (with its `llm:` / `tool:` records), the event
 * of each recorded message (for `original_event_id` and `replay_cursor`), and
 * the signals the source was resumed with. Nothing non-deterministic is
 * fetched again: a dependency the plan lacks fails the replay, naming it.
 *
 * Every message a replay produces carries `metadata.replay` (a
 * {@link ReplayMarker}); one produced by an override also carries the
 * override's before / after hashes — the receipt delta.
 *
 * Secret material is never hashed plainly (a low-entropy secret would be
 * brute-forced from its SHA-256): a `secret:` override keeps and shows the
 * deployment's keyed fingerprint of its value (`hmac-sha256:<hex>`,
 * `fingerprint` / `before_fingerprint` / `after_fingerprint`), and its
 * `sha256` / `before_sha256` / `after_sha256` stay null — the Harn receipt
 * schema allows only `sha256:` digests there. A caller may still declare the
 * plain `sha256` of its own override value to have it checked.
 */
import { createHash } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { type Message, Role } from "@trellis/contracts/core";
import { ReplayMode } from "@trellis/contracts/tasks";
import {
  SecretBox,
  type SecretFingerprint,
  type SecretFingerprints,
  TrellisError,
} from "@trellis/runtime";
import { canonicalize } from "json-canonicalize";
import { ERROR_DOMAIN, invalidRequest } from "./errors.js";

/** Key of the replay marker in message metadata (and of the summary in task metadata). */
export const REPLAY_KEY = "replay";

/** Request metadata key by which the turn runner flags a task that may be a replay. */
export const REPLAY_REQUEST_KEY = "trellis_replay";

/** Failure category of a replay task that ran into unrecorded material. */
export const REPLAY_UNAVAILABLE = "replay_dependency_unavailable";

/** The Harn mode names. */
export type ReplayModeName = "exact" | "with_overrides" | "from_checkpoint";

/** The mode name of a proto mode (UNSPECIFIED is exact). */
export function modeName(mode: ReplayMode): ReplayModeName {
  switch (mode) {
    case ReplayMode.WITH_OVERRIDES:
      return "with_overrides";
    case ReplayMode.FROM_CHECKPOINT:
      return "from_checkpoint";
    case ReplayMode.EXACT:
    case ReplayMode.UNSPECIFIED:
      return "exact";
    default:
      throw invalidRequest(`unknown replay mode ${mode}`, "mode");
  }
}

/**
 * How a replay gets the source's output again:
 * - `rerun`: the backend is deterministic (scripted): run it again;
 * - `model`: the built-in harness: run its tool loop again, answered by the
 *   recorded model responses and tool results;
 * - `recorded`: any other backend: serve the recorded output as it was.
 */
export type ReplayStrategy = "rerun" | "model" | "recorded";

/** The backend of the built-in harness (whose model calls and tool runs are recorded). */
export const HARNESS_BACKEND = "harness";

/** The strategy for a backend. */
export function strategyOf(backend: string, deterministic: ReadonlySet<string>): ReplayStrategy {
  if (deterministic.has(backend)) return "rerun";
  if (backend === HARNESS_BACKEND) return "model";
  return "recorded";
}

// ------------------------------------------------------------------ overrides

/** Dependency families an override key may name (Harn "Override keys"). */
export type OverrideFamily = "llm" | "tool" | "time" | "secret";

const KINDS: Record<OverrideFamily, readonly string[]> = {
  llm: ["llm_provider_response"],
  tool: ["tool_result", "mcp_tool_return"],
  time: ["time"],
  secret: ["secret_value"],
};

/** Visibility of override material (Harn `ReplayOverride.visibility`). */
export type OverrideVisibility = "public" | "internal" | "receipt_only";

/** An override as the replay keeps it (`replays.overrides`). */
export interface StoredOverride {
  family: OverrideFamily;
  /** The dependency label after the family (`main:1`, a tool call id, …). */
  target: string;
  kind: string;
  /**
   * The value; a `secret` family value sealed ({@link replaySecretBox},
   * `enc:v1:…`) — stored before sealing, plain — read with
   * {@link openSecretOverride}.
   */
  value: JsonValue;
  /**
   * `sha256:<hex>` of the value's RFC 8785 form — not for the `secret`
   * family (overrides stored before fingerprints may still have one there;
   * it is never shown).
   */
  sha256?: string;
  /** `secret` family: the deployment's keyed fingerprint of the value, instead of a hash. */
  fingerprint?: SecretFingerprint;
  visibility: OverrideVisibility;
  eventId: string;
  reason: string;
  /** The artifact the value was read from, when it was. */
  artifactId: string;
}

const secretBoxes = new WeakMap<SecretFingerprints, SecretBox>();

/**
 * The box `secret:` override values are sealed with before they are stored
 * (`replays.overrides`): a key derived from the deployment's fingerprint key,
 * so every replica and restart opens what another sealed.
 */
export function replaySecretBox(fingerprints: SecretFingerprints): SecretBox {
  let box = secretBoxes.get(fingerprints);
  if (!box) {
    box = fingerprints.sealingBox("replay override");
    secretBoxes.set(fingerprints, box);
  }
  return box;
}

/** The plain value of a stored `secret:` override (sealed, or plain from before sealing). */
export function openSecretOverride(fingerprints: SecretFingerprints, value: JsonValue): string {
  const stored = String(value);
  return SecretBox.isSealed(stored) ? replaySecretBox(fingerprints).open(stored) : stored;
}

/** The family and label of an override key; throws `invalid_request` for any other form. */
export function parseOverrideKey(key: string): { family: OverrideFamily; target: string } {
  const colon = key.indexOf(":");
  const family = colon > 0 ? key.slice(0, colon) : "";
  const target = colon > 0 ? key.slice(colon + 1) : "";
  if (!(family in KINDS) || target === "" || /\s/.test(key)) {
    throw invalidRequest(
      `override key ${JSON.stringify(key)} must be llm:<call_id>, tool:<tool_call_id>, time:<label> or secret:<name>`,
      `overrides.${key}`,
    );
  }
  return { family: family as OverrideFamily, target };
}

/** Checks an override's declared kind against its key's family; returns the kind to keep. */
export function overrideKind(key: string, family: OverrideFamily, declared: string): string {
  const allowed = KINDS[family];
  if (declared === "") return allowed[0] as string;
  if (!allowed.includes(declared)) {
    throw invalidRequest(
      `override ${key}: kind ${JSON.stringify(declared)} does not fit a ${family}: key (expected ${allowed.join(" or ")})`,
      `overrides.${key}.kind`,
    );
  }
  return declared;
}

/** `sha256:<hex>` of a JSON value's RFC 8785 canonical form. */
export function sha256Of(value: JsonValue): string {
  return `sha256:${createHash("sha256").update(canonicalize(value), "utf8").digest("hex")}`;
}

/**
 * Checks a caller-declared hash of override material. For a secret
 * (`secret` true) a mismatch does not echo the value's hash (errors are
 * logged and shown; the caller can hash its own value).
 */
export function checkDeclaredHash(
  key: string,
  declared: string,
  actual: string,
  secret = false,
): void {
  if (declared === "" || declared === actual) return;
  if (!/^sha256:[0-9a-f]{64}$/.test(declared)) {
    throw invalidRequest(
      `override ${key}: sha256 must be sha256:<64 lowercase hex>`,
      `overrides.${key}.sha256`,
    );
  }
  throw invalidRequest(
    secret
      ? `override ${key}: sha256 ${declared} does not match the SHA-256 of the value's RFC 8785 form`
      : `override ${key}: sha256 ${declared} does not match the value (its RFC 8785 form hashes to ${actual})`,
    `overrides.${key}.sha256`,
  );
}

// ------------------------------------------------------------------ the plan

/** A recorded message of the source, with the event that recorded it. */
export interface PlannedMessage {
  messageId: string;
  /** The event that appended it to the transcript ("" when the log no longer has it). */
  eventId: string;
  /** That event's per-resource sequence in the source task's stream. */
  sequence: number;
  /** Record keys in its metadata (`llm:main:1`, `tool:call_1`, …). */
  keys: string[];
}

/** A signal the source was resumed with, in delivery order. */
export interface PlannedSignal {
  /** The source's signal id without its task prefix (`approval`, `approval:call_1`, …). */
  label: string;
  payload: JsonValue;
}

/** A source checkpoint a from_checkpoint replay restores. */
export interface PlannedCheckpoint {
  id: string;
  eventId: string;
  label: string;
  /** Source output messages made before it (the replay's output starts after them). */
  outputCount: number;
}

/** What a replay may use, frozen when it is created (`replays.plan`). */
/** One memory read of the source, as its `agent.memory_read` event recorded it. */
export interface PlannedMemoryRead {
  eventId: string;
  toolCallId: string;
  scope: string;
  ownerId: string;
  /** The records it returned, as the run saw them. */
  memories: JsonValue[];
}

export interface ReplayPlan {
  sourceTaskId: string;
  sourceSessionId: string;
  mode: ReplayModeName;
  strategy: ReplayStrategy;
  backend: string;
  /** The source's input message and its event. */
  input: PlannedMessage;
  /** The source's output, in order. */
  messages: PlannedMessage[];
  signals: PlannedSignal[];
  checkpoint?: PlannedCheckpoint;
  /** The memory reads the source made (its `agent.memory_read` events), in order. */
  memoryReads?: PlannedMemoryRead[];
  /** The request opted into refreshed memory: reads see what the memory holds now. */
  refreshMemory?: boolean;
  /** How the source ended (or where it stands), for the `recorded` strategy. */
  source: {
    status: string;
    failure?: { category: string; message: string; retryable: boolean };
    suspension?: { label: string; kind: "input" | "auth"; metadata: JsonObject };
  };
}

/** Record keys of a message's metadata (`<family>:<label>` for the recorded families). */
export function recordKeysOf(message: Message): string[] {
  return Object.keys(message.metadata ?? {}).filter((key) => /^(llm|tool|time|secret):./.test(key));
}

/**
 * The first dependency a `model` (harness) replay needs that the recording
 * lacks, in the source's order: an assistant message without its `llm:`
 * record, model calls not numbered main:1, main:2, … without a gap, or a
 * tool message without its `tool:` record. Undefined when complete.
 */
export function firstMissingModelRecord(
  output: readonly Message[],
): { key: string; messageId: string } | undefined {
  let expected = 1;
  for (const message of output) {
    const keys = Object.keys(message.metadata ?? {});
    if (message.role === Role.ASSISTANT) {
      const key = `llm:main:${expected}`;
      if (!keys.includes(key)) return { key, messageId: message.id };
      expected += 1;
    } else if (message.role === Role.TOOL) {
      // Results the tasks service made up for a canceled turn were never recorded.
      if (message.metadata?.synthetic === true) continue;
      const key = `tool:${message.toolCallId}`;
      if (!keys.includes(key)) return { key, messageId: message.id };
    }
  }
  return undefined;
}

/** The error of a replay that cannot start: the first unavailable dependency, named. */
export function replayUnavailable(
  sourceTaskId: string,
  missing: string,
  message: string,
  metadata: Record<string, string> = {},
): TrellisError {
  // Harn: 410 "Event or replay cursor is no longer available".
  return new TrellisError({
    reason: "cursor_expired",
    message: `task ${sourceTaskId} cannot be replayed: ${message}`,
    domain: ERROR_DOMAIN,
    metadata: { source_task_id: sourceTaskId, missing, ...metadata },
  });
}

// ------------------------------------------------------------------ markers

/** What `metadata.replay` of a replayed message says (Harn `ReplayEventMetadata`). */
export interface ReplayMarker {
  source_task_id: string;
  replay_task_id: string;
  /** The source event this message re-creates (null when it has no counterpart). */
  original_event_id: string | null;
  original_message_id: string | null;
  /** `<source task id>:<sequence>`: where the original sits in the source task's stream. */
  replay_cursor: string | null;
  mode: ReplayModeName;
  override_key: string | null;
  /** Set with override_key: the receipt delta of the substitution. */
  receipt_delta_id?: string;
  override?: MarkerOverride;
  /** Further overrides applied to the same message (a tool call reading an overridden clock and secret). */
  more_overrides?: { override_key: string; receipt_delta_id: string; override: MarkerOverride }[];
}

/**
 * An override applied to a replayed message, as its marker records it.
 * A `secret:` override has null `*_sha256` and its fingerprints in
 * `*_fingerprint` (`before_sha256` is the source's recorded hash only when
 * the source predates fingerprints).
 */
export interface MarkerOverride {
  kind: string;
  /** The material path the override replaced, e.g. `metadata.llm:main:1.response`. */
  material: string;
  before_sha256: string | null;
  after_sha256: string | null;
  before_fingerprint?: SecretFingerprint | null;
  after_fingerprint?: SecretFingerprint;
  visibility: OverrideVisibility;
  reason: string;
}

/** The marker of a message that re-creates `original` (or has none). */
export function markerFor(
  plan: Pick<ReplayPlan, "sourceTaskId" | "mode">,
  replayTaskId: string,
  original: PlannedMessage | undefined,
): ReplayMarker {
  return {
    source_task_id: plan.sourceTaskId,
    replay_task_id: replayTaskId,
    original_event_id: original?.eventId || null,
    original_message_id: original?.messageId || null,
    replay_cursor: original?.eventId ? `${plan.sourceTaskId}:${original.sequence}` : null,
    mode: plan.mode,
    override_key: null,
  };
}

/** A receipt delta: one applied override (from the replayed messages' markers). */
export interface ReplayDelta {
  delta_id: string;
  override_key: string;
  kind: string;
  original_event_id: string | null;
  material: string;
  before_sha256: string | null;
  after_sha256: string | null;
  /** Set for a `secret:` override (see {@link MarkerOverride}). */
  before_fingerprint?: SecretFingerprint | null;
  after_fingerprint?: SecretFingerprint;
  reason: string;
}

/** The receipt deltas recorded on a replay's messages, in order. */
export function deltasOf(messages: readonly Message[]): ReplayDelta[] {
  const deltas: ReplayDelta[] = [];
  for (const message of messages) {
    const marker = message.metadata?.[REPLAY_KEY] as ReplayMarker | undefined;
    if (!marker?.override_key || !marker.override) continue;
    const applied = [
      {
        override_key: marker.override_key,
        receipt_delta_id: marker.receipt_delta_id,
        override: marker.override,
      },
      ...(marker.more_overrides ?? []),
    ];
    for (const a of applied) {
      deltas.push({
        delta_id: a.receipt_delta_id ?? `${marker.replay_task_id}:${a.override_key}`,
        override_key: a.override_key,
        kind: a.override.kind,
        original_event_id: marker.original_event_id,
        material: a.override.material,
        before_sha256: a.override.before_sha256,
        after_sha256: a.override.after_sha256,
        ...(a.override.after_fingerprint
          ? {
              before_fingerprint: a.override.before_fingerprint ?? null,
              after_fingerprint: a.override.after_fingerprint,
            }
          : {}),
        reason: a.override.reason,
      });
    }
  }
  return deltas;
}
