/**
 * The agent state (`session_states`, what the next run of a session starts
 * from) as the session owner holds it in memory (owner mode): the runner's
 * `loadAgentState` is served from the owned session, not from the table.
 *
 * | case | how |
 * |---|---|
 * | an owned finish left a state | the step's session carries it (`Step.agentState`), adopted with the append |
 * | a step that left no state | `SessionOwner.adopt` keeps the state the session had |
 * | the session is in memory, its state unknown (just loaded) | read once under the session's lock (after the projector passed its last state-changing append), then kept with the session |
 * | the session is not in memory | read from the table as before, not kept |
 * | a relational write of the session (it may write `session_states`), an eviction, a lost or taken lease, a failed append, a restart | the session's state in memory is dropped with it: the next read goes to the table |
 *
 * The state is kept as the JSON text the table would give back (keys in
 * jsonb's order), and parsed at each read: every run gets its own object,
 * equal key for key (and in order) to what the table returns.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";

/** A session's agent state as its owner knows it: the JSON text, or undefined for none. */
export interface KnownAgentState {
  json: string | undefined;
}

/** `state` as the table stores it and gives it back (jsonb: keys shorter first, then by bytes). */
export function knownAgentState(state: JsonObject | undefined): KnownAgentState {
  return { json: state === undefined ? undefined : JSON.stringify(jsonbOrder(state)) };
}

/** The state a run starts from (a fresh object each time). */
export function agentStateOf(known: KnownAgentState): JsonObject | undefined {
  return known.json === undefined ? undefined : (JSON.parse(known.json) as JsonObject);
}

/** `value` with every object's keys in jsonb's output order (length in UTF-8 bytes, then bytes). */
function jsonbOrder(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(jsonbOrder);
  if (value === null || typeof value !== "object") return value;
  const keys = Object.keys(value)
    .filter((key) => value[key] !== undefined)
    .map((key) => ({ key, bytes: Buffer.from(key, "utf8") }))
    .sort((a, b) => a.bytes.length - b.bytes.length || Buffer.compare(a.bytes, b.bytes));
  const out: JsonObject = {};
  for (const { key } of keys) out[key] = jsonbOrder(value[key] as JsonValue);
  return out;
}
