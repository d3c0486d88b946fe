/**
 * The checkpoint of a suspended harness turn: where the turn stands (its
 * messages, model calls, usage and the tool calls not handled yet) and the
 * call it waits on — an approval of a gated tool, or the person's answer to
 * `ask_user`. The executor stores it with the task and hands it back on
 * resume; `v` versions the shape, and a checkpoint of another version or a
 * malformed one is refused with a plain message.
 */
import { fromJson, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type Message, MessageSchema } from "@trellis/contracts/core";
import { isRecord } from "@trellis/runtime";
import { ASK_USER } from "./clarification.js";

/** A tool call waiting to be handled. */
export interface ToolCallJob {
  id: string;
  name: string;
  arguments: JsonValue;
  /** The model call that asked for it. */
  callId: string;
}

/** Where a turn stands; the checkpoint is this state, serialized. */
export interface TurnState {
  /** Messages the turn made so far (metadata dropped: already in the transcript). */
  turn: Message[];
  /** Model calls made in this turn (the step budget counts them). */
  steps: number;
  usage: { prompt: number; completion: number; total: number };
  /** Tool calls of the last model answer not handled yet, in order. */
  queue: ToolCallJob[];
}

const CHECKPOINT_VERSION = 1;

/** What a suspended turn waits for (checkpoints without `awaiting` predate clarifications). */
export type Awaiting = "approval" | "clarification";

/** A checkpoint, decoded. */
export interface Suspension {
  state: TurnState;
  pending: ToolCallJob;
  awaiting: Awaiting;
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isInteger(value) && value >= 0;
}

/** The checkpoint of a turn suspended on `pending`. */
export function encodeCheckpoint(
  state: TurnState,
  pending: ToolCallJob,
  awaiting: Awaiting,
): JsonObject {
  const job = (j: ToolCallJob): JsonObject => ({
    id: j.id,
    name: j.name,
    arguments: j.arguments,
    call_id: j.callId,
  });
  return {
    v: CHECKPOINT_VERSION,
    turn: state.turn.map((m) => toJson(MessageSchema, m) as JsonValue),
    steps: state.steps,
    usage: { ...state.usage },
    pending: job(pending),
    awaiting,
    queue: state.queue.map(job),
  };
}

function decodeJob(value: unknown): ToolCallJob {
  if (
    !isRecord(value) ||
    typeof value.id !== "string" ||
    typeof value.name !== "string" ||
    typeof value.call_id !== "string" ||
    !("arguments" in value)
  ) {
    throw new Error("a tool call in the checkpoint is malformed");
  }
  return {
    id: value.id,
    name: value.name,
    arguments: value.arguments as JsonValue,
    callId: value.call_id,
  };
}

/** A stored checkpoint, decoded; throws with a plain message when it is not one. */
export function decodeCheckpoint(value: JsonValue): Suspension {
  if (!isRecord(value) || value.v !== CHECKPOINT_VERSION) {
    throw new Error(`not a harness checkpoint of version ${CHECKPOINT_VERSION}`);
  }
  const usage = value.usage;
  if (
    !Array.isArray(value.turn) ||
    !isCount(value.steps) ||
    !isRecord(usage) ||
    !isCount(usage.prompt) ||
    !isCount(usage.completion) ||
    !isCount(usage.total) ||
    !Array.isArray(value.queue)
  ) {
    throw new Error("the checkpoint's turn, steps, usage or queue is malformed");
  }
  const awaiting = value.awaiting ?? "approval";
  if (awaiting !== "approval" && awaiting !== "clarification") {
    throw new Error(
      `the checkpoint waits for ${JSON.stringify(awaiting)}, not an approval or an answer`,
    );
  }
  const pending = decodeJob(value.pending);
  if (awaiting === "clarification" && pending.name !== ASK_USER) {
    throw new Error(`the checkpoint waits for an answer to ${pending.name}, not to ${ASK_USER}`);
  }
  return {
    state: {
      turn: value.turn.map((m) => fromJson(MessageSchema, m as JsonValue)),
      steps: value.steps,
      usage: { prompt: usage.prompt, completion: usage.completion, total: usage.total },
      queue: value.queue.map(decodeJob),
    },
    pending,
    awaiting,
  };
}
