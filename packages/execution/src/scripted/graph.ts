/**
 * Scripted graph agents: the deterministic agent every test and demo uses.
 *
 * A graph is a declarative document:
 *
 * ```json
 * {
 *   "entry": "greet",
 *   "nodes": {
 *     "greet":   { "update": { "messages": [{ "role": "assistant", "content": "Hello {{input}}" }] } },
 *     "approve": { "suspend": { "signal_id": "approval", "metadata": { "kind": "approval" } } },
 *     "done":    { "update": { "messages": [{ "role": "assistant", "content": "done" }] } },
 *     "nope":    { "raise": { "category": "provider_invalid_request", "message": "denied" } }
 *   },
 *   "edges": [
 *     { "from": "greet", "to": "approve" },
 *     { "from": "approve", "to": "done", "when": { "path": "approved", "equals": true } },
 *     { "from": "approve", "to": "nope" },
 *     { "from": "done", "to": "END" },
 *     { "from": "nope", "to": "END" }
 *   ]
 * }
 * ```
 *
 * A node either appends messages (`update`), suspends for a signal (`suspend`), or
 * fails (`raise`). An update node may say `delay_ms`: the run then takes that
 * much longer (the adapter waits, abortably; the stepping itself stays pure —
 * it only adds the delays up in `delayMs`). An update node may also say
 * `"stream": {"chunk_chars": 4, "delay_ms": 20}`: the adapter then streams the
 * text of each of its assistant messages as `text_delta` events, `chunk_chars`
 * characters at a time with `delay_ms` between chunks, before returning the
 * message whole — token streaming without a model (the stepping reports the
 * plan in `steps`). After a node, the first edge from it whose `when` holds is
 * taken (an edge without `when` always holds); edges out of a suspend node are
 * evaluated against the signal payload on resume. `END` finishes the run.
 *
 * State: besides `messages`, an update node's keys (but `delay_ms` and
 * `stream`) update state fields of those names — `{"update": {"value": 42}}` —
 * merged with the reducers the optional `state.fields` section declares
 * (`state.ts`: replace by default, append for lists). A run starts from the
 * session's stored state (declared defaults fill what it lacks); a resume
 * first writes the signal payload's declared fields into it (`{"approved":
 * true}`). The node kinds `suspend_with_descriptor` and `raises` (the harness
 * fixtures' spelling) stand for `suspend` and `raise`.
 *
 * This module is pure: it validates documents and steps through them; running
 * it against a session is the adapter's job.
 */

import { isRecord } from "@trellis/runtime";
import { checkMessage, checkStream } from "./graph-checks.js";
import { GraphDefinitionError, type GraphMessage, type Json } from "./graph-types.js";
import {
  applyUpdate,
  checkStateUpdate,
  type GraphState,
  initialState,
  MESSAGES_FIELD,
  parseStateSchema,
  payloadUpdate,
  STEP_OPTIONS,
  type StateSchema,
} from "./state.js";

export type { GraphState, StateSchema };
export { GraphDefinitionError, type GraphMessage, type Json };

/** The name of the terminal pseudo-node. */
export const END = "END";

/** How an update node streams its assistant text (both fields optional). */
export interface StreamOption {
  /** Characters (code points) per `text_delta` chunk, 1…10000; default 4. */
  chunk_chars?: number;
  /** Pause between chunks in milliseconds, 0…60000; default 20. */
  delay_ms?: number;
}

/**
 * Appends messages to the transcript and updates state fields (every other
 * key but the step options `delay_ms` and `stream`; normalized into `state`).
 */
export interface UpdateNode {
  update: {
    messages: GraphMessage[];
    /** State field updates, merged with each field's reducer (`state.ts`). */
    state?: GraphState;
    /** Simulated latency of this step in milliseconds (e.g. a slow model call). */
    delay_ms?: number;
    /** Stream the text of this node's assistant messages as it "generates" it. */
    stream?: StreamOption;
  };
}

/** Default characters per streamed chunk. */
export const DEFAULT_STREAM_CHUNK_CHARS = 4;
/** Default pause between streamed chunks, in milliseconds. */
export const DEFAULT_STREAM_DELAY_MS = 20;

/** Suspends the run until a signal arrives. */
export interface SuspendNode {
  suspend: { signal_id: string; metadata?: { [key: string]: Json }; kind?: "input" | "auth" };
}

/** Fails the run with an error category (harness §10 / llm-provider §7). */
export interface RaiseNode {
  raise: { category: string; message: string };
}

/** One node of a graph. */
export type GraphNode = UpdateNode | SuspendNode | RaiseNode;

/** A condition on the signal payload: the value at `path` (dotted) equals `equals`. */
export interface EdgeCondition {
  path: string;
  equals: Json;
}

/** A directed edge; `to` may be {@link END}. */
export interface GraphEdge {
  from: string;
  to: string;
  when?: EdgeCondition;
}

/** A validated graph document. */
export interface ScriptedGraph {
  entry: string;
  nodes: Record<string, GraphNode>;
  edges: GraphEdge[];
  /** Upper bound on nodes visited in one run (guards cycles); default 1000. */
  max_steps?: number;
  /** Declared state fields (`state.fields`); empty when none are. */
  stateSchema: StateSchema;
  /** Whether the graph keeps state besides the transcript (declares or writes a field). */
  keepsState: boolean;
}

/** Node kinds as the harness fixtures spell them, and the names they stand for. */
const NODE_ALIASES: Readonly<Record<string, "suspend" | "raise">> = {
  suspend_with_descriptor: "suspend",
  raises: "raise",
};

function checkNode(value: unknown, path: string, schema: StateSchema): GraphNode {
  if (!isRecord(value)) throw new GraphDefinitionError("must be an object", path);
  const kinds = Object.keys(value).filter(
    (k) =>
      value[k] !== undefined &&
      (k === "update" || k === "suspend" || k === "raise" || k in NODE_ALIASES),
  );
  if (kinds.length !== 1 || Object.keys(value).length !== 1) {
    throw new GraphDefinitionError("a node has exactly one of update, suspend, raise", path);
  }
  const written = kinds[0] as string;
  const kind = NODE_ALIASES[written] ?? written;
  const body = value[written];
  const at = `${path}.${written}`;
  if (kind === "update") {
    if (!isRecord(body)) throw new GraphDefinitionError("update must be an object", at);
    const messages = body.messages ?? [];
    if (!Array.isArray(messages)) {
      throw new GraphDefinitionError("messages must be a list", `${at}.messages`);
    }
    for (const [i, m] of messages.entries()) checkMessage(m, `${at}.messages[${i}]`);
    const delay = body.delay_ms;
    if (
      delay !== undefined &&
      (typeof delay !== "number" || !Number.isFinite(delay) || delay < 0 || delay > 3_600_000)
    ) {
      throw new GraphDefinitionError(
        "delay_ms must be a number of milliseconds in 0…3600000",
        `${at}.delay_ms`,
      );
    }
    if (body.stream !== undefined) checkStream(body.stream, `${at}.stream`);
    // Every other key updates a state field of that name.
    const state: GraphState = {};
    for (const [name, update] of Object.entries(body)) {
      if (name === MESSAGES_FIELD || STEP_OPTIONS.has(name)) continue;
      checkStateUpdate(schema, name, update, `${at}.${name}`);
      state[name] = update as Json;
    }
    return {
      update: {
        messages: messages as GraphMessage[],
        ...(Object.keys(state).length > 0 ? { state } : {}),
        ...(delay !== undefined ? { delay_ms: delay as number } : {}),
        ...(body.stream !== undefined ? { stream: body.stream as StreamOption } : {}),
      },
    };
  }
  if (kind === "suspend") {
    if (!isRecord(body) || typeof body.signal_id !== "string" || body.signal_id === "") {
      throw new GraphDefinitionError("suspend needs a non-empty signal_id", at);
    }
    if (body.metadata !== undefined && !isRecord(body.metadata)) {
      throw new GraphDefinitionError("metadata must be an object", `${at}.metadata`);
    }
    if (body.kind !== undefined && body.kind !== "input" && body.kind !== "auth") {
      throw new GraphDefinitionError("kind must be input or auth", `${at}.kind`);
    }
    return { suspend: body as SuspendNode["suspend"] };
  }
  if (!isRecord(body) || typeof body.category !== "string" || typeof body.message !== "string") {
    throw new GraphDefinitionError("raise needs string category and message", at);
  }
  return { raise: body as RaiseNode["raise"] };
}

/**
 * Validate a graph document. Throws {@link GraphDefinitionError} naming the
 * first problem's path (e.g. `nodes.greet.update.messages[0].role`).
 */
export function parseGraph(document: unknown): ScriptedGraph {
  if (!isRecord(document)) throw new GraphDefinitionError("must be an object", "graph");
  const { entry, nodes: written, edges } = document;
  if (!isRecord(written) || Object.keys(written).length === 0) {
    throw new GraphDefinitionError("needs at least one node", "nodes");
  }
  const stateSchema = parseStateSchema(document.state);
  const nodes: Record<string, GraphNode> = {};
  for (const [name, node] of Object.entries(written)) {
    if (name === END) throw new GraphDefinitionError(`${END} is reserved`, `nodes.${name}`);
    nodes[name] = checkNode(node, `nodes.${name}`, stateSchema);
  }
  if (typeof entry !== "string" || !(entry in nodes)) {
    throw new GraphDefinitionError("must name a node", "entry");
  }
  if (edges !== undefined && !Array.isArray(edges)) {
    throw new GraphDefinitionError("must be a list", "edges");
  }
  const checkedEdges = (edges ?? []).map((edge, i): GraphEdge => {
    const path = `edges[${i}]`;
    if (!isRecord(edge) || typeof edge.from !== "string" || typeof edge.to !== "string") {
      throw new GraphDefinitionError("an edge needs string from and to", path);
    }
    if (!(edge.from in nodes))
      throw new GraphDefinitionError(`unknown node ${edge.from}`, `${path}.from`);
    if (edge.to !== END && !(edge.to in nodes)) {
      throw new GraphDefinitionError(`unknown node ${edge.to}`, `${path}.to`);
    }
    if (edge.when !== undefined) {
      if (!isRecord(edge.when) || typeof edge.when.path !== "string" || !("equals" in edge.when)) {
        throw new GraphDefinitionError("when needs path and equals", `${path}.when`);
      }
    }
    return edge as unknown as GraphEdge;
  });
  const maxSteps = document.max_steps;
  if (maxSteps !== undefined && (typeof maxSteps !== "number" || maxSteps < 1)) {
    throw new GraphDefinitionError("must be a positive number", "max_steps");
  }
  const keepsState =
    Object.keys(stateSchema).length > 0 ||
    Object.values(nodes).some((node) => "update" in node && node.update.state !== undefined);
  return {
    entry,
    nodes,
    edges: checkedEdges,
    ...(typeof maxSteps === "number" ? { max_steps: maxSteps } : {}),
    stateSchema,
    keepsState,
  };
}

/** Where a run stands: start fresh, or resume a suspended node with a payload. */
export type RunStart = { kind: "start" } | { kind: "resume"; node: string; payload: Json };

/** Values templates may refer to: `{{input}}` and `{{signal}}`. */
export interface RunContext {
  /** Text of the input message. */
  input: string;
  /** The session's stored state (what the last completed or suspended run left). */
  state?: GraphState;
}

/** Chunking of a streamed step, with defaults filled in. */
export interface StreamPlan {
  chunkChars: number;
  delayMs: number;
}

/** One visited update node: its latency, the messages it appended, how it streams. */
export interface RunStep {
  node: string;
  delayMs: number;
  messages: GraphMessage[];
  stream?: StreamPlan;
}

/**
 * What a run produced. `delayMs` (present only when non-zero) is the sum of
 * the `delay_ms` of the update nodes visited: how long the run should take.
 * `steps` (present only when a visited update node streams) lists the update
 * nodes in order, so the adapter can wait and stream step by step; their
 * messages together are `messages`.
 */
export type RunResult = (
  | { status: "completed"; messages: GraphMessage[] }
  | {
      status: "suspended";
      messages: GraphMessage[];
      node: string;
      signalLabel: string;
      metadata: { [key: string]: Json };
      kind: "input" | "auth";
    }
  | { status: "failed"; messages: GraphMessage[]; category: string; message: string; node: string }
) & {
  delayMs?: number;
  steps?: RunStep[];
  /** The state after the run, when the graph keeps state (whatever the status). */
  state?: GraphState;
};

function valueAt(payload: Json, path: string): Json | undefined {
  let current: Json | undefined = payload;
  for (const key of path.split(".").filter((k) => k !== "")) {
    if (!isRecord(current)) return undefined;
    current = (current as { [key: string]: Json })[key];
  }
  return current;
}

function sameJson(a: Json | undefined, b: Json): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function nextNode(graph: ScriptedGraph, from: string, payload: Json | undefined): string {
  for (const edge of graph.edges) {
    if (edge.from !== from) continue;
    if (edge.when === undefined) return edge.to;
    if (payload !== undefined && sameJson(valueAt(payload, edge.when.path), edge.when.equals)) {
      return edge.to;
    }
  }
  // A node with no outgoing edge ends the run.
  return END;
}

function render(text: string, vars: Record<string, string>): string {
  return text.replace(/\{\{\s*(\w+)\s*\}\}/g, (whole, name: string) => vars[name] ?? whole);
}

function renderMessage(message: GraphMessage, vars: Record<string, string>): GraphMessage {
  const content =
    typeof message.content === "string"
      ? render(message.content, vars)
      : message.content?.map((block) =>
          isRecord(block) && typeof block.text === "string"
            ? { ...block, text: render(block.text, vars) }
            : block,
        );
  return { ...message, ...(content !== undefined ? { content } : {}) };
}

/**
 * Step through a graph from `start` until it ends, suspends or fails.
 * Deterministic: the same graph, start and context give the same result.
 */
export function runGraph(graph: ScriptedGraph, start: RunStart, context: RunContext): RunResult {
  const messages: GraphMessage[] = [];
  const vars: Record<string, string> = { input: context.input };
  const state = initialState(graph.stateSchema, context.state);
  let current: string;
  let payload: Json | undefined;
  if (start.kind === "resume") {
    const node = graph.nodes[start.node];
    if (node === undefined || !("suspend" in node)) {
      return {
        status: "failed",
        messages,
        category: "graph_invalid",
        message: `cannot resume at ${start.node}: not a suspend node`,
        node: start.node,
      };
    }
    payload = start.payload;
    vars.signal = JSON.stringify(start.payload);
    // The payload's declared fields go into the state (e.g. `approved`).
    applyUpdate(graph.stateSchema, state, payloadUpdate(graph.stateSchema, payload));
    current = nextNode(graph, start.node, payload);
  } else {
    current = graph.entry;
  }
  const maxSteps = graph.max_steps ?? 1000;
  let delayMs = 0;
  const visited: RunStep[] = [];
  let streams = false;
  // Only a run that waited (or streams) says so, keeping results of plain graphs unchanged.
  const timed = <T extends RunResult>(result: T): T => ({
    ...result,
    ...(delayMs > 0 ? { delayMs } : {}),
    ...(streams ? { steps: visited } : {}),
    ...(graph.keepsState ? { state } : {}),
  });
  for (let steps = 0; current !== END; steps++) {
    if (steps >= maxSteps) {
      return timed({
        status: "failed",
        messages,
        category: "graph_step_limit",
        message: `the graph ran more than ${maxSteps} steps`,
        node: current,
      });
    }
    const node = graph.nodes[current];
    if (node === undefined) {
      return timed({
        status: "failed",
        messages,
        category: "graph_invalid",
        message: `no node ${current}`,
        node: current,
      });
    }
    if ("update" in node) {
      const stepDelay = node.update.delay_ms ?? 0;
      delayMs += stepDelay;
      const rendered = node.update.messages.map((m) => renderMessage(m, vars));
      messages.push(...rendered);
      if (node.update.state) applyUpdate(graph.stateSchema, state, node.update.state);
      const stream = node.update.stream;
      if (stream !== undefined) streams = true;
      visited.push({
        node: current,
        delayMs: stepDelay,
        messages: rendered,
        ...(stream !== undefined
          ? {
              stream: {
                chunkChars: stream.chunk_chars ?? DEFAULT_STREAM_CHUNK_CHARS,
                delayMs: stream.delay_ms ?? DEFAULT_STREAM_DELAY_MS,
              },
            }
          : {}),
      });
      current = nextNode(graph, current, payload);
    } else if ("suspend" in node) {
      return timed({
        status: "suspended",
        messages,
        node: current,
        signalLabel: node.suspend.signal_id,
        metadata: node.suspend.metadata ?? {},
        kind: node.suspend.kind ?? "input",
      });
    } else {
      return timed({
        status: "failed",
        messages,
        category: node.raise.category,
        message: node.raise.message,
        node: current,
      });
    }
  }
  return timed({ status: "completed", messages });
}
