/**
 * The harness's built-in clarification tool, `ask_user`.
 *
 * An agent whose definition says `"ask_user": true` is offered one more tool,
 * `ask_user({question})`. When the model calls it, the harness does not run
 * anything: it suspends the turn (reason `clarification`, kind `input`,
 * signal label `clarification:<tool call id>`) with the question in the
 * suspension's metadata. Resuming with `{"answer": "<text>"}` feeds the text
 * back to the model as that tool call's result, and the loop goes on.
 *
 * This module holds the pieces that are about the tool itself — its schema,
 * the checks on the model's call and on the resume payload, and the
 * suspension metadata; the turn logic lives in `harness-adapter.ts`.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { isRecord } from "@trellis/runtime";
import type { ModelTool } from "./provider.js";
import type { InputProblem } from "./tools.js";

/** The built-in clarification tool's name. */
export const ASK_USER = "ask_user";

/** Longest question the model may ask (characters). */
export const MAX_QUESTION_LENGTH = 4_000;

/** Longest answer a resume may carry (characters). */
export const MAX_ANSWER_LENGTH = 100_000;

/** The tool as the model sees it. */
export const ASK_USER_TOOL: ModelTool = {
  name: ASK_USER,
  description:
    "Ask the user a clarifying question and wait for the answer. Use it only when you " +
    "cannot go on without information that only the user has; the answer comes back " +
    "as this call's result.",
  parameters: {
    type: "object",
    properties: {
      question: {
        type: "string",
        minLength: 1,
        maxLength: MAX_QUESTION_LENGTH,
        description: "The question, as the user should read it.",
      },
    },
    required: ["question"],
    additionalProperties: false,
  },
};

/**
 * The question of an `ask_user` call, or the problems with its input (the
 * model gets them back as an error result, like any malformed tool call).
 */
export function questionOf(input: JsonValue): { question: string } | { problems: InputProblem[] } {
  if (!isRecord(input)) {
    return { problems: [{ path: "", message: "the input must be a JSON object" }] };
  }
  const problems: InputProblem[] = [];
  for (const key of Object.keys(input)) {
    if (key !== "question") {
      problems.push({ path: `/${key}`, message: "must NOT have additional properties" });
    }
  }
  const question = input.question;
  if (typeof question !== "string") {
    problems.push({
      path: question === undefined ? "" : "/question",
      message: question === undefined ? "must have required property 'question'" : "must be string",
    });
  } else if (question.trim() === "") {
    problems.push({ path: "/question", message: "must not be blank" });
  } else if (question.length > MAX_QUESTION_LENGTH) {
    problems.push({
      path: "/question",
      message: `must NOT have more than ${MAX_QUESTION_LENGTH} characters`,
    });
  }
  return problems.length > 0 ? { problems } : { question: (question as string).trim() };
}

/** The answer of a clarification resume payload `{"answer": "<text>"}`, or why it is not one. */
export function answerOf(payload: JsonValue): { answer: string } | { problem: string } {
  if (!isRecord(payload)) return { problem: "the payload is not a JSON object" };
  const extra = Object.keys(payload).filter((key) => key !== "answer");
  if (extra.length > 0) return { problem: `unknown field(s) ${extra.join(", ")}` };
  const { answer } = payload;
  if (typeof answer !== "string") return { problem: "answer must be a string" };
  if (answer.trim() === "") return { problem: "answer must not be blank" };
  if (answer.length > MAX_ANSWER_LENGTH) {
    return { problem: `answer must not be longer than ${MAX_ANSWER_LENGTH} characters` };
  }
  return { answer };
}

/** What a clarification suspension says about the question (its `metadata`). */
export function clarificationMetadata(
  question: string,
  toolCallId: string,
  callId: string,
): JsonObject {
  return {
    kind: "clarification",
    question,
    tool_call_id: toolCallId,
    tool_name: ASK_USER,
    call_id: callId,
    // The shape of the payload that answers it.
    answer: { answer: "" },
  };
}
