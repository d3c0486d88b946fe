/**
 * A compacted history on the built-in harness: the compaction checkpoint (the
 * system message named `context_summary` the tasks service puts in place of
 * older turns) reaches the model — in place for OpenAI, in the system text for
 * Anthropic — while other system-role transcript messages (replies to people)
 * still do not; and the definition's `context` (compaction settings, read by
 * the tasks service) is accepted as an object only.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import {
  CONTEXT_SUMMARY_NAME,
  createHarnessAdapter,
  parseHarnessDefinition,
} from "../../src/index.js";
import { createTools, recordedProviders, turnRequest } from "../../src/testing/harness-agents.js";
import { ANTHROPIC_MESSAGES, fixture, OPENAI_CHAT } from "../../src/testing/recorded-server.js";
import { useRecordedServer } from "./support/fixture.js";

const server = useRecordedServer();

function message(role: Role, text: string, name = ""): Message {
  return create(MessageSchema, {
    role,
    name,
    parts: [{ kind: { case: "text", value: { text } } }],
  });
}

const history = [
  message(
    Role.SYSTEM,
    "Summary of the 3 earlier turns: the user lives in Paris.",
    CONTEXT_SUMMARY_NAME,
  ),
  message(Role.USER, "And tomorrow?"),
  message(Role.SYSTEM, "The agent failed; please retry."),
  message(Role.ASSISTANT, "I cannot tell tomorrow's weather yet."),
];

async function run(definition: JsonObject, path: string, response: string) {
  const adapter = createHarnessAdapter({
    providers: recordedProviders(server.url),
    tools: createTools().tools,
  });
  server.enqueue(path, fixture(response));
  const before = server.requests.length;
  const { request } = turnRequest(definition, "What's the weather in Paris?");
  const result = await adapter.execute({ ...request, history });
  expect(result.status).toBe("completed");
  expect(server.pending()).toEqual({});
  return server.requests[before]?.body as {
    system?: string;
    messages: { role: string; content: unknown }[];
  };
}

describe("compacted history on the harness", () => {
  it("hands OpenAI the summary in place, and no other transcript system message", async () => {
    const body = await run(
      {
        provider: "openai",
        model: "gpt-4o-mini",
        system: "You are terse.",
        tools: [],
        stream: false,
      },
      OPENAI_CHAT,
      "openai/chat-weather-final.http",
    );
    expect(body.messages.map((m) => [m.role, m.content])).toEqual([
      ["system", "You are terse."],
      ["system", "Summary of the 3 earlier turns: the user lives in Paris."],
      ["user", "And tomorrow?"],
      ["assistant", "I cannot tell tomorrow's weather yet."],
      ["user", "What's the weather in Paris?"],
    ]);
  });

  it("hands Anthropic the summary in its system text", async () => {
    const body = await run(
      {
        provider: "anthropic",
        model: "claude-sonnet-5-5",
        system: "You are terse.",
        tools: [],
        max_output_tokens: 256,
        stream: false,
      },
      ANTHROPIC_MESSAGES,
      "anthropic/messages-weather-final.http",
    );
    expect(body.system).toBe(
      "You are terse.\n\nSummary of the 3 earlier turns: the user lives in Paris.",
    );
    expect(JSON.stringify(body.messages)).not.toContain("please retry");
  });

  it("accepts the compaction settings under `context`, as an object only", () => {
    const base = { provider: "openai", model: "gpt-4o-mini" };
    expect(() =>
      parseHarnessDefinition(
        { ...base, context: { budget_tokens: 8000, strategy: "model" } },
        ["openai"],
        () => true,
      ),
    ).not.toThrow();
    expect(() => parseHarnessDefinition({ ...base, context: 5 }, ["openai"], () => true)).toThrow(
      /context: must be an object/,
    );
  });
});
