/**
 * The scripted graph backend ("scripted"): runs a graph document
 * (`./graph.ts`) as an agent turn.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { type ChatMessageJson, chatToMessage, textOf } from "@trellis/messages";
import { TrellisError } from "@trellis/runtime";
import type { ExecutionAdapter, ExecutionRequest, ExecutionResult } from "../executor.js";
import {
  GraphDefinitionError,
  type GraphMessage,
  parseGraph,
  runGraph,
  type ScriptedGraph,
} from "./graph.js";

/** Backend id of scripted graph agents. */
export const SCRIPTED_BACKEND = "scripted";

function toMessages(messages: GraphMessage[]) {
  return messages.map((m) => chatToMessage(m as ChatMessageJson));
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function abortableDelay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
  });
}

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
  return {
    backendId: SCRIPTED_BACKEND,
    validateDefinition(definition) {
      graphOf(definition);
    },
    async execute(request: ExecutionRequest): Promise<ExecutionResult> {
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
        { input: textOf(request.input) },
      );
      if (result.delayMs !== undefined) {
        // Simulated latency (update nodes' delay_ms); a cancel cuts it short.
        await abortableDelay(result.delayMs, request.signal);
        if (request.signal.aborted) return { status: "cancelled", messages: [] };
      }
      const messages = toMessages(result.messages);
      for (const message of messages) request.onEvent?.({ kind: "message", message });
      switch (result.status) {
        case "completed":
          return { status: "completed", messages };
        case "suspended":
          return {
            status: "suspended",
            messages,
            signalLabel: result.signalLabel,
            metadata: result.metadata as JsonObject,
            kind: result.kind,
            checkpoint: { node: result.node },
          };
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
  };
}
