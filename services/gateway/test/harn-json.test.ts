import { create, type JsonObject } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import {
  EventSchema,
  MessageSchema,
  Role,
  SessionState,
  TaskStatus,
  ToolResultStatus,
  Visibility,
} from "@trellis/contracts/core";
import {
  ArtifactKind,
  ArtifactSchema,
  OutcomeSchema,
  OutcomeStatus,
  SessionSchema,
  TaskSchema,
} from "@trellis/contracts/tasks";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { messageFromHarn, taskInputFromHarn } from "../src/domain/harn-input.js";
import {
  artifactToHarn,
  eventToHarn,
  listJson,
  messageToHarn,
  outcomeToHarn,
  sessionToHarn,
  taskToHarn,
} from "../src/domain/harn-json.js";
import { JsonReader } from "../src/domain/json-input.js";

const at = timestampFromMs(Date.UTC(2026, 3, 25, 19, 0, 0));

function thrown(fn: () => unknown): { reason: string; param: string | undefined } {
  try {
    fn();
  } catch (error) {
    if (isTrellisError(error)) return { reason: error.reason, param: error.param };
    throw error;
  }
  throw new Error("expected an error");
}

describe("proto → Harn JSON", () => {
  it("maps a task with uppercase status, RFC 3339 times and null for absent fields", () => {
    const task = create(TaskSchema, {
      id: "task_1",
      sessionId: "ses_1",
      workspaceId: "default",
      status: TaskStatus.WORKING,
      createdBy: "admin",
      agentId: "agent_echo",
      createdAt: at,
      updatedAt: at,
      input: create(MessageSchema, {
        id: "msg_1",
        role: Role.USER,
        createdAt: at,
        parts: [{ kind: { case: "text", value: { text: "hi" } } }],
      }),
    });
    const json = taskToHarn(task);
    expect(json).toMatchObject({
      id: "task_1",
      object: "task",
      created_at: "2026-04-25T19:00:00Z",
      status: "WORKING",
      persona_id: "agent_echo",
      parent_task_id: null,
      started_at: null,
      completed_at: null,
      failure: null,
      metadata: {},
    });
    expect(json.input).toMatchObject({
      object: "message",
      role: "user",
      session_id: "ses_1",
      task_id: "task_1",
      parts: [{ type: "text", text: "hi", visibility: "public" }],
    });
    expect(Object.keys(json).slice(0, 5)).toEqual([
      "id",
      "object",
      "created_at",
      "updated_at",
      "metadata",
    ]);
  });

  it("maps a session with a transcript summary", () => {
    const json = sessionToHarn(
      create(SessionSchema, {
        id: "ses_1",
        workspaceId: "default",
        state: SessionState.ACTIVE,
        messageCount: 3n,
        turnCount: 1n,
        createdAt: at,
      }),
    );
    expect(json).toMatchObject({
      object: "session",
      state: "ACTIVE",
      transcript: { object: "transcript", message_count: 3, turn_count: 1 },
      parent_session_id: null,
      updated_at: "2026-04-25T19:00:00Z",
    });
  });

  it("turns chat tool calls and tool messages into tool_call / tool_result parts", () => {
    const assistant = messageToHarn(
      create(MessageSchema, {
        id: "m1",
        role: Role.ASSISTANT,
        toolCalls: [
          {
            id: "call_1",
            name: "search",
            arguments: {
              kind: {
                case: "structValue",
                value: { fields: { q: { kind: { case: "stringValue", value: "x" } } } },
              },
            },
          },
        ],
      }),
    );
    expect(assistant.parts).toEqual([
      {
        type: "tool_call",
        tool_call_id: "call_1",
        name: "search",
        input: { q: "x" },
        visibility: "public",
      },
    ]);
    const tool = messageToHarn(
      create(MessageSchema, {
        id: "m2",
        role: Role.TOOL,
        toolCallId: "call_1",
        parts: [{ kind: { case: "text", value: { text: "42" } } }],
      }),
    );
    expect(tool.parts).toEqual([
      {
        type: "tool_result",
        tool_call_id: "call_1",
        output: "42",
        status: "ok",
        visibility: "public",
      },
    ]);
  });

  it("never shows reasoning or non-public parts, but keeps a redacted slot", () => {
    const json = messageToHarn(
      create(MessageSchema, {
        id: "m",
        role: Role.ASSISTANT,
        parts: [
          { kind: { case: "thinking", value: { text: "secret chain of thought" } } },
          {
            visibility: Visibility.RECEIPT_ONLY,
            kind: { case: "text", value: { text: "evidence" } },
          },
          { kind: { case: "text", value: { text: "answer" } } },
        ],
      }),
    );
    const text = JSON.stringify(json);
    expect(text).not.toContain("secret chain");
    expect(text).not.toContain("evidence");
    expect(json.parts).toEqual([
      { type: "json", value: { redacted: true, part_type: "thinking" }, visibility: "internal" },
      { type: "json", value: { redacted: true, part_type: "text" }, visibility: "receipt_only" },
      { type: "text", text: "answer", visibility: "public" },
    ]);
  });

  it("maps an event with an integer sequence and a typed payload, deterministically", () => {
    const event = create(EventSchema, {
      id: "evt_2",
      kind: "task.started",
      resource: { object: "task", id: "task_1" },
      createdAt: at,
      sequence: 2n,
      sessionId: "ses_1",
      taskId: "task_1",
      workspaceId: "default",
      previousEventId: "evt_1",
      payload: {
        kind: {
          case: "taskStatusChanged",
          value: { status: TaskStatus.WORKING, previousStatus: TaskStatus.SUBMITTED },
        },
      },
    });
    const json = eventToHarn(event);
    expect(json).toMatchObject({
      id: "evt_2",
      object: "event",
      event: "task.started",
      resource: { object: "task", id: "task_1" },
      sequence: 2,
      payload: { status: "WORKING", previous_status: "SUBMITTED", reason: null, failure: null },
      previous_event_id: "evt_1",
      actor: null,
    });
    expect(JSON.stringify(eventToHarn(event))).toBe(JSON.stringify(json));
  });

  it("sorts the keys of free-form data so reads are byte-identical", () => {
    const a = eventToHarn(
      create(EventSchema, {
        id: "e",
        kind: "vendor.x",
        payload: { kind: { case: "data", value: { b: 1, a: { d: 2, c: 3 } } as JsonObject } },
      }),
    );
    expect(JSON.stringify(a.payload)).toBe('{"a":{"c":3,"d":2},"b":1}');
  });

  it("maps an artifact with bare-hex sha256 and lowercase kind", () => {
    const json = artifactToHarn(
      create(ArtifactSchema, {
        id: "art_1",
        kind: ArtifactKind.LOG,
        mimeType: "text/plain",
        sha256: `sha256:${"a".repeat(64)}`,
        createdAt: at,
      }),
    );
    expect(json).toMatchObject({
      object: "artifact",
      kind: "log",
      sha256: "a".repeat(64),
      uri: null,
      visibility: "public",
    });
  });

  it("opens artifacts and outcomes with the resource head (never updated)", () => {
    const head = (json: JsonObject) => Object.entries(json).slice(0, 5);
    const artifact = artifactToHarn(
      create(ArtifactSchema, { id: "art_1", createdAt: at, metadata: { b: 1, a: 2 } }),
    );
    expect(head(artifact)).toEqual([
      ["id", "art_1"],
      ["object", "artifact"],
      ["created_at", "2026-04-25T19:00:00Z"],
      ["updated_at", "2026-04-25T19:00:00Z"],
      ["metadata", { a: 2, b: 1 }],
    ]);
    expect(Object.keys(artifact.metadata as JsonObject)).toEqual(["a", "b"]);
    const outcome = outcomeToHarn(
      create(OutcomeSchema, { id: "out_1", status: OutcomeStatus.SUCCEEDED, createdAt: at }),
    );
    expect(head(outcome)).toEqual([
      ["id", "out_1"],
      ["object", "outcome"],
      ["created_at", "2026-04-25T19:00:00Z"],
      ["updated_at", "2026-04-25T19:00:00Z"],
      ["metadata", {}],
    ]);
    expect(outcome.status).toBe("SUCCEEDED");
    expect(head(outcomeToHarn(create(OutcomeSchema, { id: "out_2" })))[2]).toEqual([
      "created_at",
      null,
    ]);
  });

  it("builds the PaginatedList envelope", () => {
    expect(listJson([1], { nextCursor: "" })).toEqual({
      object: "list",
      data: [1],
      page: { next_cursor: null, has_more: false },
    });
    expect(listJson([], { nextCursor: "c2" })).toEqual({
      object: "list",
      data: [],
      page: { next_cursor: "c2", has_more: true },
    });
  });
});

describe("Harn JSON → proto", () => {
  it("parses a MessageInput with every core part type", () => {
    const message = messageFromHarn(
      new JsonReader({
        role: "user",
        unknown_field: "ignored",
        parts: [
          { type: "text", text: "hello" },
          { type: "json", value: { a: 1 }, visibility: "internal" },
          { type: "tool_call", tool_call_id: "c1", name: "f", input: { x: 1 } },
          { type: "tool_result", tool_call_id: "c1", output: [1], status: "error" },
          { type: "artifact_ref", artifact_id: "art_1" },
          { type: "file_ref", uri: "file:///a", mime_type: "text/plain" },
          { type: "image_ref", artifact_id: "art_2", mime_type: "image/png" },
        ],
      }),
    );
    expect(message.role).toBe(Role.USER);
    expect(message.parts.map((p) => p.kind.case)).toEqual([
      "text",
      "json",
      "toolCall",
      "toolResult",
      "artifactRef",
      "fileRef",
      "imageRef",
    ]);
    expect(message.parts[1]?.visibility).toBe(Visibility.INTERNAL);
    const result = message.parts[3]?.kind;
    expect(result?.case === "toolResult" && result.value.status).toBe(ToolResultStatus.ERROR);
  });

  it("refuses wrong types with the dotted param", () => {
    expect(
      thrown(() =>
        messageFromHarn(
          new JsonReader({ role: "user", parts: [{ type: "text", text: 5 }] }, "input"),
        ),
      ),
    ).toEqual({
      reason: "invalid_request",
      param: "input.parts[0].text",
    });
    expect(
      thrown(() => messageFromHarn(new JsonReader({ role: "robot", parts: [] }, "message"))).param,
    ).toBe("message.role");
    expect(
      thrown(() => messageFromHarn(new JsonReader({ role: "user", parts: [{ type: "video" }] })))
        .param,
    ).toBe("parts[0].type");
    expect(thrown(() => messageFromHarn(new JsonReader({ role: "user", parts: {} }))).param).toBe(
      "parts",
    );
    expect(thrown(() => taskInputFromHarn(undefined, "input")).param).toBe("input");
    expect(thrown(() => taskInputFromHarn(42, "input")).param).toBe("input");
  });

  it("accepts a task input as a structured object or a string", () => {
    const structured = taskInputFromHarn({ question: "why" }, "input");
    expect(structured.role).toBe(Role.USER);
    expect(structured.parts[0]?.kind.case).toBe("json");
    const text = taskInputFromHarn("hi", "input");
    expect(text.parts[0]?.kind).toMatchObject({ case: "text", value: { text: "hi" } });
  });
});
