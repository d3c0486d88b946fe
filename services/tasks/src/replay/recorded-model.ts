/**
 * Model responses for a replay of a harness task: the recorded ones (from the
 * `llm:<call_id>` records the harness keeps in assistant messages' metadata)
 * and replacements given as overrides, in a provider's wire shape (an OpenAI
 * chat completion or an Anthropic message), mapped to the answer the harness
 * expects from its model-provider port.
 */
import { clone, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { type Message, MessageSchema } from "@trellis/contracts/core";
import type { FinishReason, ModelResponse } from "@trellis/execution";
import { type ChatBlockJson, type ChatToolCallJson, chatToMessage } from "@trellis/messages";
import { isJsonObject } from "@trellis/runtime";
import { invalidRequest } from "../domain/errors.js";

function count(value: unknown): number | null {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : null;
}

const FINISH_REASONS: readonly FinishReason[] = [
  "stop",
  "length",
  "tool_calls",
  "content_filter",
  "error",
];

/**
 * The answer a recorded model call gave: the assistant message as the
 * transcript kept it (ids, times and metadata dropped: the harness records
 * the call again on the replayed message), with the record's finish reason,
 * usage and verbatim provider response.
 */
export function recordedResponse(record: JsonObject, message: Message): ModelResponse {
  const copy = clone(MessageSchema, message);
  copy.id = "";
  copy.createdAt = undefined;
  copy.metadata = undefined;
  const usage = isJsonObject(record.usage) ? record.usage : {};
  const finish = FINISH_REASONS.find((r) => r === record.finish_reason) ?? "stop";
  const cached = count(usage.cached_tokens);
  return {
    message: copy,
    finishReason: finish,
    usage: {
      promptTokens: count(usage.prompt_tokens),
      completionTokens: count(usage.completion_tokens),
      totalTokens: count(usage.total_tokens),
      ...(cached !== null ? { cachedTokens: cached } : {}),
    },
    raw: isJsonObject(record.response) ? record.response : {},
    model: typeof record.model === "string" ? record.model : "",
  };
}

function toolArguments(text: unknown, param: string): JsonObject {
  if (isJsonObject(text)) return text;
  if (typeof text !== "string" || text.trim() === "") return {};
  try {
    const parsed = JSON.parse(text) as JsonValue;
    if (isJsonObject(parsed)) return parsed;
  } catch {
    // reported below
  }
  throw invalidRequest("tool call arguments must be a JSON object (or its JSON text)", param);
}

/** An OpenAI chat completion's `finish_reason`s, as the harness names them. */
const OPENAI_FINISH: Record<string, FinishReason> = {
  stop: "stop",
  length: "length",
  tool_calls: "tool_calls",
  function_call: "tool_calls",
  content_filter: "content_filter",
};

/** An Anthropic message's `stop_reason`s, as the harness names them. */
const ANTHROPIC_FINISH: Record<string, FinishReason> = {
  end_turn: "stop",
  stop_sequence: "stop",
  max_tokens: "length",
  tool_use: "tool_calls",
  refusal: "content_filter",
};

/**
 * What a provider response says, in the harness's terms: the answer's blocks
 * and tool calls, why it finished and what it used.
 */
interface WireAnswer {
  blocks: ChatBlockJson[];
  calls: ChatToolCallJson[];
  finishReason: FinishReason;
  usage: ModelResponse["usage"];
}

function fromOpenAI(raw: JsonObject, param: string): WireAnswer {
  const choice = Array.isArray(raw.choices) ? raw.choices[0] : undefined;
  if (!isJsonObject(choice) || !isJsonObject(choice.message)) {
    throw invalidRequest("an OpenAI chat completion needs choices[0].message", param);
  }
  const message = choice.message;
  const blocks: ChatBlockJson[] = [];
  const reasoning = message.reasoning_content ?? message.reasoning;
  if (typeof reasoning === "string" && reasoning !== "") {
    blocks.push({ type: "thinking", text: reasoning });
  }
  if (typeof message.content === "string" && message.content !== "") {
    blocks.push({ type: "text", text: message.content });
  }
  const calls: ChatToolCallJson[] = (
    Array.isArray(message.tool_calls) ? message.tool_calls : []
  ).map((call, index) => {
    const fn = isJsonObject(call) && isJsonObject(call.function) ? call.function : undefined;
    if (!isJsonObject(call) || typeof call.id !== "string" || !fn || typeof fn.name !== "string") {
      throw invalidRequest(
        `choices[0].message.tool_calls[${index}] needs an id and function.name`,
        param,
      );
    }
    return {
      id: call.id,
      name: fn.name,
      arguments: toolArguments(fn.arguments, `${param}.tool_calls[${index}]`),
    };
  });
  const usage = isJsonObject(raw.usage) ? raw.usage : {};
  return {
    blocks,
    calls,
    finishReason: finishOf(choice.finish_reason, calls.length, OPENAI_FINISH),
    usage: {
      promptTokens: count(usage.prompt_tokens),
      completionTokens: count(usage.completion_tokens),
      totalTokens: count(usage.total_tokens),
    },
  };
}

function fromAnthropic(raw: JsonObject, param: string): WireAnswer {
  const blocks: ChatBlockJson[] = [];
  const calls: ChatToolCallJson[] = [];
  for (const [index, block] of (raw.content as JsonValue[]).entries()) {
    if (!isJsonObject(block)) throw invalidRequest(`content[${index}] must be an object`, param);
    if (block.type === "text" && typeof block.text === "string" && block.text !== "") {
      blocks.push({ type: "text", text: block.text });
    } else if (block.type === "thinking" && typeof block.thinking === "string") {
      blocks.push({ type: "thinking", text: block.thinking });
    } else if (block.type === "tool_use") {
      if (typeof block.id !== "string" || typeof block.name !== "string") {
        throw invalidRequest(`content[${index}] is a tool_use without id or name`, param);
      }
      calls.push({
        id: block.id,
        name: block.name,
        arguments: toolArguments(block.input, `${param}.content[${index}].input`),
      });
    }
  }
  const usage = isJsonObject(raw.usage) ? raw.usage : {};
  const prompt = count(usage.input_tokens);
  const completion = count(usage.output_tokens);
  return {
    blocks,
    calls,
    finishReason: finishOf(raw.stop_reason, calls.length, ANTHROPIC_FINISH),
    usage: {
      promptTokens: prompt,
      completionTokens: completion,
      totalTokens: prompt !== null && completion !== null ? prompt + completion : null,
    },
  };
}

function finishOf(
  value: unknown,
  toolCalls: number,
  known: Record<string, FinishReason>,
): FinishReason {
  // An override may leave the finish reason out: what it says decides.
  if (typeof value === "string" && known[value]) return known[value];
  return toolCalls > 0 ? "tool_calls" : "stop";
}

function assistant(blocks: ChatBlockJson[], calls: ChatToolCallJson[], param: string): Message {
  if (!blocks.some((b) => b.type === "text") && calls.length === 0) {
    throw invalidRequest("the replacement answer has neither text nor tool calls", param);
  }
  return chatToMessage({
    role: "assistant",
    content: blocks,
    ...(calls.length > 0 ? { tool_calls: calls } : {}),
  });
}

/**
 * The answer an `llm:` override gives: its value is a provider response in
 * wire form — an OpenAI chat completion (`choices[0].message`) or an
 * Anthropic message (`content` blocks). Throws `invalid_request` (param
 * `overrides.<key>.value`) for anything else.
 */
export function overrideResponse(value: JsonValue, key: string, model: string): ModelResponse {
  const param = `overrides.${key}.value`;
  if (!isJsonObject(value)) {
    throw invalidRequest("an llm: override's value must be a provider response object", param);
  }
  const answer = Array.isArray(value.choices)
    ? fromOpenAI(value, param)
    : Array.isArray(value.content)
      ? fromAnthropic(value, param)
      : undefined;
  if (!answer) {
    throw invalidRequest(
      "an llm: override's value must be an OpenAI chat completion (choices) or an Anthropic message (content)",
      param,
    );
  }
  return {
    message: assistant(answer.blocks, answer.calls, param),
    finishReason: answer.finishReason,
    usage: answer.usage,
    raw: value,
    model: typeof value.model === "string" ? value.model : model,
  };
}
