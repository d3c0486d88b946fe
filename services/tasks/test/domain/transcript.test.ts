import { create } from "@bufbuild/protobuf";
import {
  type Message,
  MessageSchema,
  Role,
  ToolCallSchema,
  Visibility,
} from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import {
  assignTurns,
  closeToolCalls,
  forkLength,
  planTruncation,
  publicView,
  startsTurn,
  summarize,
  syntheticToolResults,
} from "../../src/domain/transcript.js";

function msg(
  role: Role,
  text = "x",
  extra: Partial<Pick<Message, "toolCalls" | "toolCallId">> = {},
): Message {
  const message = create(MessageSchema, {
    role,
    parts: text ? [{ kind: { case: "text", value: { text } } }] : [],
  });
  return { ...message, ...extra };
}

describe("turns", () => {
  it("start at each user or agent message", () => {
    expect(
      [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.TOOL, Role.AGENT].map((role) =>
        startsTurn({ role }),
      ),
    ).toEqual([false, true, false, false, true]);
  });

  it("are numbered from zero; the preamble counts as turn 0", () => {
    const roles = [Role.SYSTEM, Role.USER, Role.ASSISTANT, Role.USER, Role.ASSISTANT, Role.TOOL];
    expect(
      assignTurns(
        0n,
        roles.map((role) => ({ role })),
      ),
    ).toEqual({
      turns: [0n, 0n, 0n, 1n, 1n, 1n],
      turnCount: 2n,
    });
    expect(assignTurns(2n, [{ role: Role.ASSISTANT }, { role: Role.USER }])).toEqual({
      turns: [1n, 2n],
      turnCount: 3n,
    });
  });
});

describe("truncation", () => {
  it("keeps the first N turns: everything before the (N+1)-th turn start", () => {
    // [sys, u0, a0, u1, a1, u2, a2]: turn starts at 1, 3, 5.
    expect(planTruncation({ messageCount: 7n, turnCount: 3n }, 1n, 3n)).toEqual({
      cut: 3n,
      dropped: 4n,
      messageCount: 3n,
      turnCount: 1n,
    });
    // Keeping 0 turns keeps the preamble.
    expect(planTruncation({ messageCount: 7n, turnCount: 3n }, 0n, 1n)).toMatchObject({
      cut: 1n,
      dropped: 6n,
    });
  });

  it("drops nothing when the session has no more turns than kept", () => {
    expect(planTruncation({ messageCount: 7n, turnCount: 3n }, 3n, undefined)).toEqual({
      cut: 7n,
      dropped: 0n,
      messageCount: 7n,
      turnCount: 3n,
    });
    expect(() => planTruncation({ messageCount: 1n, turnCount: 1n }, -1n, undefined)).toThrow(
      /keep_turns/,
    );
  });
});

describe("forks", () => {
  it("copy the whole transcript or its first N messages", () => {
    expect(forkLength(5n, 0n)).toBe(5n);
    expect(forkLength(5n, 2n)).toBe(2n);
    expect(() => forkLength(5n, 6n)).toThrow(/past the end/);
  });
});

describe("synthetic tool results", () => {
  const call = (id: string, name: string) => create(ToolCallSchema, { id, name });

  it("answer every tool call nothing answered, in call order", () => {
    const messages = [
      msg(Role.USER, "do things"),
      msg(Role.ASSISTANT, "", { toolCalls: [call("c1", "search")] }),
      msg(Role.TOOL, "found", { toolCallId: "c1" }),
      msg(Role.ASSISTANT, "", {
        toolCalls: [call("c2", "deploy"), call("c3", "notify")],
      }),
    ];
    const synthetic = syntheticToolResults(messages, "the turn was canceled");
    expect(synthetic.map((m) => [m.role, m.toolCallId])).toEqual([
      [Role.TOOL, "c2"],
      [Role.TOOL, "c3"],
    ]);
    const first = synthetic[0]?.parts[0]?.kind;
    expect(first?.case === "text" && first.value.text).toBe(
      "Tool call deploy was interrupted: the turn was canceled. It did not return a result.",
    );
    expect(synthetic[0]?.metadata).toMatchObject({ synthetic: true, status: "interrupted" });
  });

  it("also close Harn tool_call parts, and leave a closed transcript alone", () => {
    const harn = create(MessageSchema, {
      role: Role.ASSISTANT,
      parts: [{ kind: { case: "toolCall", value: { toolCallId: "p1", name: "fetch" } } }],
    });
    expect(syntheticToolResults([harn], "stopped").map((m) => m.toolCallId)).toEqual(["p1"]);
    const closed = [msg(Role.USER), msg(Role.ASSISTANT, "done")];
    expect(closeToolCalls(closed, "x")).toEqual(closed);
  });
});

describe("events show public parts only", () => {
  it("drops thinking (internal by default) and parts marked internal", () => {
    const message = create(MessageSchema, {
      role: Role.ASSISTANT,
      parts: [
        { kind: { case: "thinking", value: { text: "hmm" } } },
        { kind: { case: "text", value: { text: "answer" } } },
        { visibility: Visibility.INTERNAL, kind: { case: "text", value: { text: "note" } } },
      ],
    });
    expect(publicView(message).parts.map((p) => p.kind.case)).toEqual(["text"]);
    const plain = msg(Role.USER, "hi");
    expect(publicView(plain)).toBe(plain);
  });
});

describe("outcome summaries", () => {
  it("use the last assistant text", () => {
    expect(
      summarize(
        [
          msg(Role.ASSISTANT, "first"),
          msg(Role.TOOL, "t", { toolCallId: "c" }),
          msg(Role.ASSISTANT, "last"),
        ],
        "none",
      ),
    ).toBe("last");
    expect(summarize([], "nothing")).toBe("nothing");
    expect(summarize([msg(Role.ASSISTANT, "y".repeat(400))], "")).toHaveLength(280);
  });
});
