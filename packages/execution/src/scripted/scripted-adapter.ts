/**
 * The scripted graph backend ("scripted"): runs a graph document
 * (`./graph.ts`) as an agent turn.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import {
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  type ExecutionRequest,
  type ExecutionResult,
} from "@trellis/adapter-sdk";
import { type Message, Role, Visibility } from "@trellis/contracts/core";
import { type ChatMessageJson, chatToMessage, textOf } from "@trellis/messages";
import { sleep, TrellisError } from "@trellis/runtime";
import {
  GraphDefinitionError,
  type GraphMessage,
  type GraphState,
  parseGraph,
  type RunStep,
  runGraph,
  type ScriptedGraph,
  type StreamPlan,
} from "./graph.js";

/** Backend id of scripted graph agents. */
export const SCRIPTED_BACKEND = "scripted";

function toMessages(messages: GraphMessage[]) {
  return messages.map((m) => chatToMessage(m as ChatMessageJson));
}

/** `text` cut into pieces of at most `size` code points (never inside a surrogate pair). */
export function chunkText(text: string, size: number): string[] {
  const points = Array.from(text);
  const chunks: string[] = [];
  for (let i = 0; i < points.length; i += size) chunks.push(points.slice(i, i + size).join(""));
  return chunks;
}

/**
 * Plays a streamed run step by step: each step's delay, then the text of each
 * of its assistant messages as `text_delta` chunks (pausing between them), then
 * the messages. `aborted` when the signal aborted on the way (nothing is returned then).
 */
async function playSteps(
  steps: RunStep[],
  request: ExecutionRequest,
): Promise<{ aborted: boolean; messages: Message[] }> {
  const out: Message[] = [];
  for (const step of steps) {
    if (step.delayMs > 0) await sleep(step.delayMs, request.signal);
    if (request.signal.aborted) return { aborted: true, messages: [] };
    const messages = toMessages(step.messages);
    for (const message of messages) {
      if (step.stream && message.role === Role.ASSISTANT) {
        const played = await streamText(textOf(message), step.stream, request);
        if (!played) return { aborted: true, messages: [] };
      }
      request.onEvent?.({ kind: "message", message });
      out.push(message);
    }
  }
  return { aborted: false, messages: out };
}

/** Emits `text` as `text_delta` chunks; false when aborted before the last one. */
async function streamText(
  text: string,
  plan: StreamPlan,
  request: ExecutionRequest,
): Promise<boolean> {
  for (const [i, chunk] of chunkText(text, plan.chunkChars).entries()) {
    if (i > 0 && plan.delayMs > 0) await sleep(plan.delayMs, request.signal);
    if (request.signal.aborted) return false;
    request.onEvent?.({ kind: "text_delta", text: chunk });
  }
  return true;
}

/**
 * What the scripted backend honestly does (BYOH §1.4): it replays a script,
 * so it runs no tools (tool calls in a script are just messages); a suspend
 * node is a real in-band pause with structured state (the node), and one
 * whose metadata says `kind: "approval"` is an approval interrupt; it sees
 * attachments only as transcript content, which it keeps untouched.
 */
export const SCRIPTED_CAPABILITIES: ExecutionCapabilities = {
  schemaVersion: EXECUTION_SCHEMA_VERSION,
  toolUse: "none",
  structuredToolCalls: false,
  continuationSupport: "structured",
  approvalInterrupts: "native",
  traceDepth: "minimal",
  attachments: true,
  streaming: "adapter-mediated",
  maxContextStrategy: "large",
  notes: [
    "deterministic scripted graph; tool calls in a script are replayed messages, not tool use",
    "attachments are kept in the transcript; the script does not interpret them",
    "update nodes with a stream option emit their assistant text as text_delta chunks",
  ],
};

/** Create the scripted backend. Parsed graphs are cached per definition object. */
export function createScriptedAdapter(): ExecutionAdapter {
  const cache = new WeakMap<JsonObject, ScriptedGraph>();
  const graphOf = (definition: JsonObject): ScriptedGraph => {
    let graph = cache.get(definition);
    if (!graph) {
      try {
        graph = parseGraph(definition);
      } catch (error) {
        if (error instanceof GraphDefinitionError) {
          throw new TrellisError({
            reason: "agent_definition_invalid",
            message: `scripted graph: ${error.message}`,
            param: `agent.definition.${error.path}`,
          });
        }
        throw error;
      }
      cache.set(definition, graph);
    }
    return graph;
  };
  return defineAdapter({
    backendId: SCRIPTED_BACKEND,
    capabilities: SCRIPTED_CAPABILITIES,
    validateDefinition(definition) {
      graphOf(definition);
    },
    async run(request: ExecutionRequest): Promise<ExecutionResult> {
      const graph = graphOf(request.agent.definition);
      if (request.signal.aborted) return { status: "cancelled", messages: [] };
      const resumeNode =
        request.resume &&
        typeof request.resume.checkpoint === "object" &&
        request.resume.checkpoint !== null
          ? (request.resume.checkpoint as { node?: JsonValue }).node
          : undefined;
      const result = runGraph(
        graph,
        request.resume && typeof resumeNode === "string"
          ? { kind: "resume", node: resumeNode, payload: request.resume.payload }
          : { kind: "start" },
        // Only what every reader may see: internal and receipt-only parts
        // of the input must not come back in a (public) reply.
        {
          input: textOf(publicParts(request.input)),
          ...(request.state ? { state: request.state as GraphState } : {}),
        },
      );
      // The state goes back with completed and suspended runs; a failed run's is dropped.
      const state = result.state ? { state: result.state as JsonObject } : {};
      let messages: Message[];
      if (result.steps !== undefined) {
        // A streaming graph: wait and stream node by node; a cancel cuts it short.
        const played = await playSteps(result.steps, request);
        if (played.aborted) return { status: "cancelled", messages: [] };
        messages = played.messages;
      } else {
        if (result.delayMs !== undefined) {
          // Simulated latency (update nodes' delay_ms); a cancel cuts it short.
          await sleep(result.delayMs, request.signal);
          if (request.signal.aborted) return { status: "cancelled", messages: [] };
        }
        messages = toMessages(result.messages);
        for (const message of messages) request.onEvent?.({ kind: "message", message });
      }
      switch (result.status) {
        case "completed":
          return { status: "completed", messages, ...state };
        case "suspended": {
          const approval = result.metadata.kind === "approval";
          return {
            status: "suspended",
            messages,
            signalLabel: result.signalLabel,
            metadata: result.metadata as JsonObject,
            kind: result.kind,
            checkpoint: { node: result.node },
            reason: approval ? "approval" : "clarification",
            ...state,
            ...(approval
              ? {
                  approvalRequest: {
                    approvalKey: result.signalLabel,
                    metadata: result.metadata as JsonObject,
                  },
                }
              : {}),
          };
        }
        case "failed":
          return {
            status: "failed",
            messages,
            category: result.category,
            message: result.message,
            // harness §7.2: transient provider categories are worth retrying.
            retryable: ["provider_unavailable", "provider_rate_limit", "timeout"].includes(
              result.category,
            ),
          };
      }
    },
  });
}

/** The message with only its public parts (visibility public or unset). */
function publicParts(message: Message): Message {
  return {
    ...message,
    parts: message.parts.filter(
      (part) => part.visibility === Visibility.UNSPECIFIED || part.visibility === Visibility.PUBLIC,
    ),
  };
}
