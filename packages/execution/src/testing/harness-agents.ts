/** Tools, agent definitions and requests the harness tests share. */
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import {
  createAnthropicProvider,
  createOpenAIProvider,
  type ExecutionEvent,
  type ExecutionRequest,
  type HarnessTool,
  type ModelProviderFactory,
} from "../index.js";

/** A user message with one text part. */
export function userText(text: string): Message {
  return create(MessageSchema, {
    role: Role.USER,
    parts: [{ kind: { case: "text", value: { text } } }],
  });
}

/**
 * The `get_weather` tool the recorded conversations call (18 °C and sunny in
 * any city); `ran` is told each input it really ran with.
 */
export function weatherTool(ran: (input: JsonObject) => void): HarnessTool {
  return {
    name: "get_weather",
    description: "The current weather of a city.",
    inputSchema: {
      type: "object",
      properties: { city: { type: "string", minLength: 1 } },
      required: ["city"],
      additionalProperties: false,
    },
    run(input) {
      ran(input);
      return { city: input.city as string, temperature_c: 18, sky: "sunny" };
    },
  };
}

/** The test tools, counting how often each really ran. */
export function createTools(options: { emailDelayMs?: number } = {}) {
  const runs = { get_weather: [] as JsonObject[], send_email: [] as JsonObject[] };
  const weather = weatherTool((input) => runs.get_weather.push(input));
  const email: HarnessTool = {
    name: "send_email",
    description: "Send an email on the user's behalf.",
    requiresApproval: true,
    inputSchema: {
      type: "object",
      properties: {
        to: { type: "string" },
        subject: { type: "string" },
        body: { type: "string" },
      },
      required: ["to", "subject", "body"],
    },
    async run(input) {
      runs.send_email.push(input);
      if (options.emailDelayMs) await new Promise((r) => setTimeout(r, options.emailDelayMs));
      return `sent to ${input.to as string}`;
    },
  };
  return { tools: [weather, email], runs };
}

/** Both providers pointed at the replay server. */
export function recordedProviders(url: string): Record<string, ModelProviderFactory> {
  return {
    openai: createOpenAIProvider({ apiKey: "sk-test-recorded", baseURL: `${url}/v1` }),
    anthropic: createAnthropicProvider({ apiKey: "sk-ant-test-recorded", baseURL: url }),
  };
}

/** A turn request for a harness agent, collecting its execution events. */
export function turnRequest(
  definition: JsonObject,
  input: string,
  options: {
    taskId?: string;
    resume?: { checkpoint: JsonValue; payload: JsonValue };
    signal?: AbortSignal;
  } = {},
): { request: ExecutionRequest; events: ExecutionEvent[] } {
  const events: ExecutionEvent[] = [];
  return {
    events,
    request: {
      taskId: options.taskId ?? "task_harness_1",
      sessionId: "ses_harness",
      workspaceId: "ws_default",
      agent: { id: "agent_harness", backend: "harness", definition, tools: [] },
      history: [],
      input: userText(input),
      signal: options.signal ?? new AbortController().signal,
      onEvent: (event) => events.push(event),
      ...(options.resume ? { resume: options.resume } : {}),
    },
  };
}
