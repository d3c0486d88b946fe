import { create, type JsonValue } from "@bufbuild/protobuf";
import { MessageSchema, PartSchema, Role } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import {
  type ChatMessageJson,
  chatToMessage,
  messageToChat,
  validateChatMessage,
  validateToolCallReference,
  validateTranscript,
} from "../src/index.js";

const roundTrip = (json: ChatMessageJson) => messageToChat(chatToMessage(json));

describe("chat JSON ↔ proto Message", () => {
  it("round-trips every chat shape", () => {
    const shapes: ChatMessageJson[] = [
      { role: "system", content: "be brief" },
      { role: "user", content: "hi" },
      {
        role: "user",
        content: [
          { type: "text", text: "what is this?" },
          {
            type: "image",
            source: { type: "url", url: "https://example.test/cat.png" },
            detail: "low",
          },
          {
            type: "image",
            source: { type: "inline", base64_data: "iVBORw0KGgo=" },
            media_type: "image/png",
          },
        ],
      },
      {
        role: "assistant",
        content: [
          { type: "thinking", text: "hmm", signature: "sig" },
          { type: "redacted_thinking", data: "opaque" },
          { type: "text", text: "a cat" },
        ],
      },
      {
        role: "assistant",
        tool_calls: [{ id: "call_1", name: "weather", arguments: { city: "Oslo" } }],
      },
      { role: "tool", tool_call_id: "call_1", content: "4°C" },
    ];
    for (const shape of shapes) expect(roundTrip(shape)).toEqual(shape);
  });

  it("marks thinking internal by default", () => {
    const m = chatToMessage({ role: "assistant", content: [{ type: "thinking", text: "x" }] });
    expect(m.parts[0]?.visibility).toBe(2);
  });
});

describe("validateChatMessage (harness-chat §3.1)", () => {
  const ok: ChatMessageJson[] = [
    { role: "user", content: "hi" },
    { role: "assistant", tool_calls: [{ id: "a", name: "t", arguments: {} }] },
    { role: "tool", tool_call_id: "a", content: "r" },
    { role: "system", content: "s" },
  ];
  it.each(ok)("accepts %j", (json) => {
    expect(validateChatMessage(chatToMessage(json))).toBeUndefined();
  });

  const bad: [ChatMessageJson, string, RegExp][] = [
    [{ role: "robot", content: "x" }, "message.role", /role must be one of/],
    [{ role: "user", content: "" }, "message.content", /needs content/],
    [{ role: "system", content: "" }, "message.content", /system message/],
    [{ role: "assistant", content: "" }, "message.content", /content or tool_calls/],
    [{ role: "tool", content: "r" }, "message.tool_call_id", /tool_call_id/],
    [
      { role: "user", content: "x", tool_call_id: "a" },
      "message.tool_call_id",
      /only allowed on tool/,
    ],
    [
      { role: "assistant", content: [{ type: "image", source: { type: "url", url: "u" } }] },
      "message.parts[0]",
      /only allowed in user/,
    ],
    [
      {
        role: "user",
        content: [{ type: "image", source: { type: "inline", base64_data: "AAAA" } }],
      },
      "message.parts[0].image.media_type",
      /needs a media_type/,
    ],
    [
      {
        role: "user",
        content: [
          {
            type: "image",
            source: { type: "inline", base64_data: "AAAA" },
            media_type: "image/tiff",
          },
        ],
      },
      "message.parts[0].image.media_type",
      /unsupported image media type/,
    ],
    [
      { role: "user", content: [{ type: "thinking", text: "t" }] },
      "message.parts[0]",
      /only allowed in assistant/,
    ],
    [
      {
        role: "assistant",
        tool_calls: [
          { id: "a", name: "t" },
          { id: "a", name: "t" },
        ],
      },
      "message.tool_calls[1].id",
      /used twice/,
    ],
  ];
  it.each(bad)("rejects %j at %s", (json, path, message) => {
    const problem = validateChatMessage(chatToMessage(json));
    expect(problem?.path).toBe(path);
    expect(problem?.message).toMatch(message);
  });

  it("rejects Harn-only parts in a chat message", () => {
    const m = create(MessageSchema, {
      role: Role.USER,
      parts: [create(PartSchema, { kind: { case: "json", value: {} } })],
    });
    expect(validateChatMessage(m)?.message).toMatch(/unsupported content block type json/);
  });

  it("checks tool results answer an earlier tool call", () => {
    const list = [
      chatToMessage({ role: "user", content: "q" }),
      chatToMessage({ role: "tool", tool_call_id: "nope", content: "r" }),
    ];
    expect(validateTranscript(list)?.path).toBe("messages[1].tool_call_id");
  });
});

describe("harness-chat §3.1: string-only roles, tool arguments, tool call references", () => {
  it("rejects a system message whose content is a list of blocks", () => {
    const m = chatToMessage({
      role: "system",
      content: [
        { type: "text", text: "a" },
        { type: "text", text: "b" },
      ],
    });
    expect(validateChatMessage(m)).toEqual({
      path: "message.content",
      message: expect.stringMatching(/single string/),
    });
  });

  it("rejects a tool message whose content is a list of blocks", () => {
    const m = chatToMessage({
      role: "tool",
      tool_call_id: "a",
      content: [
        { type: "text", text: "a" },
        { type: "text", text: "b" },
      ],
    });
    expect(validateChatMessage(m)?.message).toMatch(/single string/);
  });

  it("accepts an empty tool result (an empty string is a string)", () => {
    expect(
      validateChatMessage(chatToMessage({ role: "tool", tool_call_id: "a", content: "" })),
    ).toBeUndefined();
  });

  it("accepts object and null tool arguments, rejects other JSON", () => {
    const withArgs = (args: JsonValue) =>
      chatToMessage({ role: "assistant", tool_calls: [{ id: "a", name: "t", arguments: args }] });
    expect(validateChatMessage(withArgs({ city: "Oslo" }))).toBeUndefined();
    expect(validateChatMessage(withArgs(null))).toBeUndefined();
    expect(validateChatMessage(withArgs("Oslo"))).toEqual({
      path: "message.tool_calls[0].arguments",
      message: "tool call arguments must be a JSON object",
    });
    expect(validateChatMessage(withArgs([1]))?.path).toBe("message.tool_calls[0].arguments");
  });

  it("checks a tool message against the history it joins", () => {
    const history = [
      chatToMessage({ role: "user", content: "weather?" }),
      chatToMessage({ role: "assistant", tool_calls: [{ id: "call_1", name: "weather" }] }),
    ];
    const answer = chatToMessage({ role: "tool", tool_call_id: "call_1", content: "4°C" });
    const stray = chatToMessage({ role: "tool", tool_call_id: "call_9", content: "?" });
    expect(validateToolCallReference(answer, history)).toBeUndefined();
    expect(validateToolCallReference(stray, history)).toEqual({
      path: "message.tool_call_id",
      message: "tool_call_id call_9 does not match an earlier assistant tool call",
    });
    expect(
      validateToolCallReference(chatToMessage({ role: "user", content: "hi" }), []),
    ).toBeUndefined();
  });
});
