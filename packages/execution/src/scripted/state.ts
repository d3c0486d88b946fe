/**
 * The state a scripted graph keeps besides the transcript, and how updates
 * merge into it (graph-engine reducers, as the harness fixtures declare them):
 *
 * ```json
 * "state": { "fields": {
 *   "message_count": { "type": "list<int>", "reducer": "append", "default": [] },
 *   "approved":      { "type": "bool", "default": false }
 * } }
 * ```
 *
 * | reducer | an update of the field |
 * |---|---|
 * | `replace` (default, also for fields not declared) | becomes its value |
 * | `append` (lists only) | adds its items at the end |
 *
 * `messages` is the transcript, not part of this state: it always appends
 * (harness-chat §4), so it may be declared only with the `append` reducer.
 * A field's `default` is its value until something writes it; `type` is
 * documentation only. Pure: no I/O.
 */

import { isRecord } from "@trellis/runtime";
import { GraphDefinitionError, type Json } from "./graph-types.js";

/** How a field's updates merge into its value. */
export type Reducer = "replace" | "append";

/** One declared field. */
export interface StateField {
  reducer: Reducer;
  default?: Json;
}

/** The declared fields of a graph's state (may be empty). */
export type StateSchema = Readonly<Record<string, StateField>>;

/** A graph's state: field name → value. */
export type GraphState = { [key: string]: Json };

/** The transcript's field name (harness-chat §4). */
export const MESSAGES_FIELD = "messages";

/** Update-node keys that are options of the step, not state fields. */
export const STEP_OPTIONS: ReadonlySet<string> = new Set(["delay_ms", "stream"]);

const FIELD_KEYS = new Set(["type", "reducer", "default"]);

/** Validate a graph's `state` section (absent: no declared fields). */
export function parseStateSchema(value: unknown): StateSchema {
  if (value === undefined) return {};
  if (!isRecord(value)) throw new GraphDefinitionError("must be an object like {fields}", "state");
  for (const key of Object.keys(value)) {
    if (key !== "fields")
      throw new GraphDefinitionError("unknown key (expected fields)", `state.${key}`);
  }
  const fields = value.fields ?? {};
  if (!isRecord(fields)) throw new GraphDefinitionError("must be an object", "state.fields");
  const schema: Record<string, StateField> = {};
  for (const [name, spec] of Object.entries(fields)) {
    const path = `state.fields.${name}`;
    if (!isRecord(spec)) throw new GraphDefinitionError("must be an object", path);
    for (const key of Object.keys(spec)) {
      if (!FIELD_KEYS.has(key)) {
        throw new GraphDefinitionError(
          "unknown key (expected type, reducer, default)",
          `${path}.${key}`,
        );
      }
    }
    const reducer = spec.reducer ?? "replace";
    if (reducer !== "replace" && reducer !== "append") {
      throw new GraphDefinitionError("reducer must be replace or append", `${path}.reducer`);
    }
    if (spec.type !== undefined && typeof spec.type !== "string") {
      throw new GraphDefinitionError("type must be a string", `${path}.type`);
    }
    if (name === MESSAGES_FIELD) {
      if (reducer !== "append") {
        throw new GraphDefinitionError(
          "messages always appends (harness-chat §4)",
          `${path}.reducer`,
        );
      }
      continue;
    }
    if (STEP_OPTIONS.has(name)) {
      throw new GraphDefinitionError(`${name} is an update option, not a state field`, path);
    }
    if (reducer === "append" && spec.default !== undefined && !Array.isArray(spec.default)) {
      throw new GraphDefinitionError("an append field's default must be a list", `${path}.default`);
    }
    schema[name] = {
      reducer,
      ...(spec.default !== undefined ? { default: spec.default as Json } : {}),
    };
  }
  return schema;
}

/** Check one state update of a node against the schema (append fields take lists). */
export function checkStateUpdate(
  schema: StateSchema,
  name: string,
  value: unknown,
  path: string,
): void {
  if (value === undefined) throw new GraphDefinitionError("must have a value", path);
  if (schema[name]?.reducer === "append" && !Array.isArray(value)) {
    throw new GraphDefinitionError("an append field is updated with a list of items", path);
  }
}

/** The state a run starts from: the stored state, declared defaults for what it lacks. */
export function initialState(schema: StateSchema, stored: GraphState | undefined): GraphState {
  const state: GraphState = {};
  for (const [name, field] of Object.entries(schema)) {
    if (field.default !== undefined) state[name] = structuredClone(field.default);
  }
  for (const [name, value] of Object.entries(stored ?? {})) {
    if (name !== MESSAGES_FIELD) state[name] = value;
  }
  return state;
}

/** Merge `update` into `state` (in place) with each field's reducer. */
export function applyUpdate(schema: StateSchema, state: GraphState, update: GraphState): void {
  for (const [name, value] of Object.entries(update)) {
    if (schema[name]?.reducer === "append") {
      const current = state[name];
      const items = Array.isArray(value) ? value : [value];
      state[name] = [...(Array.isArray(current) ? current : []), ...structuredClone(items)];
    } else {
      state[name] = structuredClone(value);
    }
  }
}

/**
 * What a resume writes into the state: the signal payload's fields that the
 * state declares (e.g. `approved` of `{approved: true}`), each with its reducer.
 * Other payload fields only steer the edges.
 */
export function payloadUpdate(schema: StateSchema, payload: Json | undefined): GraphState {
  if (!isRecord(payload)) return {};
  const update: GraphState = {};
  for (const [name, value] of Object.entries(payload)) {
    if (name in schema && value !== undefined) update[name] = value as Json;
  }
  return update;
}
