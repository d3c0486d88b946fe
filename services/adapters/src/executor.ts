/**
 * The execution seam (BYOH): how the tasks service asks an agent backend to run
 * one turn. The proto contracts of issue "adapters" (`trellis.adapters.v1`)
 * will mirror this one-to-one; until then this TypeScript port is the seam and
 * {@link createLocalExecutor} runs backends in process.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { Message } from "@trellis/contracts/core";

/** The agent as the executor sees it. */
export interface ExecutionAgent {
  id: string;
  /** Backend id: "scripted", … */
  backend: string;
  /** Backend-specific definition (e.g. the scripted graph document). */
  definition: JsonObject;
  tools: readonly string[];
}

/** Progress an execution reports while it runs (streamed into the event log). */
export type ExecutionEvent =
  | { kind: "text_delta"; text: string }
  | { kind: "thinking_delta"; text: string }
  | { kind: "message"; message: Message }
  | { kind: "tool_started"; toolCallId: string; name: string }
  | {
      kind: "tool_finished";
      toolCallId: string;
      name: string;
      status: "ok" | "error" | "denied" | "timeout";
    };

/** One turn to run. */
export interface ExecutionRequest {
  taskId: string;
  sessionId: string;
  workspaceId: string;
  agent: ExecutionAgent;
  /** The session transcript before this turn (the input message is NOT in it). */
  history: readonly Message[];
  /** The turn's input message. */
  input: Message;
  /** Set when resuming a suspended turn: where it stopped and what the signal carried. */
  resume?: { checkpoint: JsonValue; payload: JsonValue };
  /** Aborted when the task is canceled or interrupted. */
  signal: AbortSignal;
  onEvent?(event: ExecutionEvent): void;
}

/** How a turn ended. `messages` are the new messages, in execution order. */
export type ExecutionResult =
  | { status: "completed"; messages: Message[] }
  | {
      status: "suspended";
      messages: Message[];
      /** Backend's label for what it waits on; the task builds the signal id from it. */
      signalLabel: string;
      metadata: JsonObject;
      /** INPUT_REQUIRED ("input") or AUTH_REQUIRED ("auth"). */
      kind: "input" | "auth";
      /** Opaque state handed back in `resume.checkpoint`. */
      checkpoint: JsonValue;
    }
  | { status: "failed"; messages: Message[]; category: string; message: string; retryable: boolean }
  | { status: "cancelled"; messages: Message[] };

/** An agent backend. */
export interface ExecutionAdapter {
  readonly backendId: string;
  /** Check a definition when an agent is created; throws a TrellisError when invalid. */
  validateDefinition?(definition: JsonObject): void;
  execute(request: ExecutionRequest): Promise<ExecutionResult>;
}

/** Runs a turn on whichever backend the agent names (the dispatch port). */
export interface AgentExecutor {
  /** Backends this executor can run. */
  backends(): readonly string[];
  validateDefinition(backend: string, definition: JsonObject): void;
  execute(request: ExecutionRequest): Promise<ExecutionResult>;
}
