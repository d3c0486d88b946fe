/**
 * The replay projection of a receipt: the part of its canonical form that a
 * deterministic replay must reproduce byte for byte (Harn replay contract,
 * "Determinism fixture": byte-identical canonical receipt JSON after RFC 8785,
 * signatures excluded). See the README, "Replays", for the reading.
 *
 * Two replays of one source are two runs: each has its own task, session,
 * trace, receipt id, clock and place in the workspace's chain. The
 * projection keeps everything the run derived from the recording and the
 * request, and replaces what identifies the run itself:
 *
 * - `signatures` and `chain` are removed (the signature is implementation-
 *   and key-specific; the chain links the run into its workspace's history
 *   and its Merkle root hashes the run's own events, which carry the run's
 *   ids and times), and `issuer.public_key_id` (the signing key, which
 *   rotates) becomes `<key_id>`;
 * - the run's identifiers — `receipt_id`, `subject.id`, and
 *   `identifiers.{task_id, session_id, trace_id, branch_id}` — are replaced,
 *   wherever their values occur (whole or inside a string such as a URI or a
 *   delta id), by `<receipt_id>`, `<task_id>`, …;
 * - clock readings — every `*_at` member — become `<time>`, and
 *   `autonomy_budget.consumed.wall_time_ms` becomes `<duration>`;
 * - hashes over the run's own events — the `event_log` material of the run's
 *   own stream and approvals' `evidence_hash` — become `<run_events>`, and
 *   approval ids (signal ids, minted per run) `<approval_id>`.
 *
 * Everything else stays: the source task and its receipt, the replay cursor,
 * mode, determinism class, overrides and deltas with their hashes, tool calls
 * with input / output hashes, model route, cost and tokens, final state,
 * counts of messages and events.
 */
import { canonicalJson } from "./canonical.js";
import { isJsonObject } from "./receipt.js";

const IDENTITY_FIELDS = ["task_id", "session_id", "trace_id", "branch_id"] as const;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function substitute(value: Json, replacements: readonly [string, string][]): Json {
  if (typeof value === "string") {
    let out = value;
    for (const [from, to] of replacements) out = out.split(from).join(to);
    return out;
  }
  if (Array.isArray(value)) return value.map((v) => substitute(v, replacements));
  if (value !== null && typeof value === "object") {
    const out: { [key: string]: Json } = {};
    for (const [key, member] of Object.entries(value)) {
      out[key] =
        key.endsWith("_at") && typeof member === "string"
          ? "<time>"
          : substitute(member, replacements);
    }
    return out;
  }
  return value;
}

/** The projection as a JSON value (see the module comment). */
export function replayProjectionValue(receipt: string | object): Json {
  const doc = (typeof receipt === "string" ? JSON.parse(receipt) : structuredClone(receipt)) as {
    [key: string]: Json;
  };
  if (!isJsonObject(doc)) throw new TypeError("a receipt is a JSON object");
  delete doc.signatures;
  delete doc.chain;
  const replacements: [string, string][] = [];
  const add = (value: Json | undefined, placeholder: string) => {
    if (typeof value === "string" && value !== "" && value !== "none") {
      replacements.push([value, placeholder]);
    }
  };
  add(doc.receipt_id, "<receipt_id>");
  const identifiers = isJsonObject(doc.identifiers)
    ? (doc.identifiers as Record<string, Json>)
    : {};
  for (const field of IDENTITY_FIELDS) add(identifiers[field], `<${field}>`);
  const subject = isJsonObject(doc.subject) ? (doc.subject as Record<string, Json>) : {};
  if (subject.id !== identifiers.task_id) add(subject.id, "<subject_id>");
  // Longer values first, so that no id is cut by a shorter one inside it.
  replacements.sort((a, b) => b[0].length - a[0].length);

  const runTask = identifiers.task_id;
  const replay = doc.replay_input;
  if (isJsonObject(replay) && Array.isArray(replay.materials)) {
    for (const material of replay.materials as Json[]) {
      if (isJsonObject(material) && material.kind === "event_log" && material.id === runTask) {
        if ("sha256" in material) (material as Record<string, Json>).sha256 = "<run_events>";
      }
    }
  }
  if (Array.isArray(doc.approvals)) {
    for (const approval of doc.approvals) {
      if (!isJsonObject(approval)) continue;
      const a = approval as Record<string, Json>;
      if ("approval_id" in a) a.approval_id = "<approval_id>";
      if ("evidence_hash" in a) a.evidence_hash = "<run_events>";
    }
  }
  if (isJsonObject(doc.issuer) && "public_key_id" in doc.issuer) {
    (doc.issuer as Record<string, Json>).public_key_id = "<key_id>";
  }
  const budget = doc.autonomy_budget;
  if (isJsonObject(budget) && isJsonObject(budget.consumed) && "wall_time_ms" in budget.consumed) {
    (budget.consumed as Record<string, Json>).wall_time_ms = "<duration>";
  }
  return substitute(doc, replacements);
}

/** The RFC 8785 canonical text of a receipt's replay projection. */
export function replayProjection(receipt: string | object): string {
  return canonicalJson(replayProjectionValue(receipt));
}
