import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ErrorBucket, SuspensionKind } from "@trellis/contracts/chat";
import { Role, TaskStatus } from "@trellis/contracts/core";
import { TaskSchema } from "@trellis/contracts/tasks";
import { chatToMessage, textOf } from "@trellis/messages";
import { isTrellisError } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { loadChatConfig } from "../src/config.js";
import { bucketName, bucketOf, canonicalCategory } from "../src/domain/buckets.js";
import {
  outcomeFromDispatchError,
  outcomeFromTask,
  shapeInvalidOutcome,
} from "../src/domain/outcome.js";
import {
  DEFAULT_REPLY_TEMPLATES,
  errorReply,
  matchesTemplate,
  renderReplyText,
  templateProblem,
} from "../src/domain/replies.js";

const templates = DEFAULT_REPLY_TEMPLATES;

describe("error buckets (harness §7, harness-chat §10)", () => {
  it.each([
    ["session_load_failed", ErrorBucket.SESSION_TERMINATING],
    ["session_state_migration_chain_ambiguous", ErrorBucket.SESSION_TERMINATING],
    ["suspension_persistence_failed", ErrorBucket.SESSION_TERMINATING],
    ["harness_session_id_unresolved", ErrorBucket.SESSION_TERMINATING],
    ["provider_unavailable", ErrorBucket.RETRYABLE_TRANSIENT],
    ["provider_rate_limit", ErrorBucket.RETRYABLE_TRANSIENT],
    ["provider_model_not_loaded", ErrorBucket.RETRYABLE_TRANSIENT],
    ["provider_invalid_request", ErrorBucket.USER_CORRECTABLE],
    ["provider_invalid_response", ErrorBucket.USER_CORRECTABLE],
    ["provider_authentication", ErrorBucket.USER_CORRECTABLE],
    ["suspension_resume_payload_invalid", ErrorBucket.USER_CORRECTABLE],
    ["chat_message_shape_invalid", ErrorBucket.USER_CORRECTABLE],
  ])("%s → %s", (category, bucket) => {
    expect(bucketOf(category)).toBe(bucket);
  });

  it("reads harness-chat §10.2's names as the llm-provider §7 names (spec README)", () => {
    expect(canonicalCategory("provider_timeout")).toBe("provider_unavailable");
    expect(canonicalCategory("Provider_Rate_Limited")).toBe("provider_rate_limit");
    expect(bucketOf("provider_timeout")).toBe(ErrorBucket.RETRYABLE_TRANSIENT);
  });

  it("session_save_failed: retryable when the store was unreachable, else terminating", () => {
    expect(bucketOf("session_save_failed", { retryable: true })).toBe(
      ErrorBucket.RETRYABLE_TRANSIENT,
    );
    expect(bucketOf("session_save_failed", { reason: "service_unavailable" })).toBe(
      ErrorBucket.RETRYABLE_TRANSIENT,
    );
    expect(bucketOf("session_save_failed")).toBe(ErrorBucket.SESSION_TERMINATING);
  });

  it("treats unknown categories as retryable-transient (no internals in the reply)", () => {
    expect(bucketOf("graph_step_limit")).toBe(ErrorBucket.RETRYABLE_TRANSIENT);
  });

  it("names buckets in the harness conformance vocabulary", () => {
    expect(bucketName(ErrorBucket.SESSION_TERMINATING)).toBe("session_terminating");
    expect(bucketName(ErrorBucket.RETRYABLE_TRANSIENT)).toBe("retryable_transient");
    expect(bucketName(ErrorBucket.USER_CORRECTABLE)).toBe("user_correctable");
  });
});

describe("reply templates (harness-chat §10)", () => {
  it("renders the spec's default wording as a system message", () => {
    const reply = errorReply(templates, ErrorBucket.SESSION_TERMINATING, {
      diagnostic: "x",
      category: "session_load_failed",
    });
    expect(reply.role).toBe(Role.SYSTEM);
    expect(textOf(reply)).toBe("This conversation can't continue. Please start a new one.");
    expect(
      textOf(
        errorReply(templates, ErrorBucket.RETRYABLE_TRANSIENT, { diagnostic: "x", category: "c" }),
      ),
    ).toBe("I had trouble responding. Try again in a moment.");
  });

  it("puts the diagnostic into the user-correctable reply, as one sentence", () => {
    const text = renderReplyText(templates.userCorrectable, {
      diagnostic: "  the model refused\n the image. ",
      category: "provider_invalid_request",
    });
    expect(text).toBe(
      "That request couldn't be processed: the model refused the image. Please adjust your message and try again.",
    );
  });

  it("matches replies to templates case-insensitively (spec README)", () => {
    expect(
      matchesTemplate(
        "this conversation can't continue. please start a new one.",
        templates.sessionTerminating,
      ),
    ).toBe(true);
    expect(
      matchesTemplate(
        "That request couldn't be processed: bad role. Please adjust your message and try again.",
        templates.userCorrectable,
      ),
    ).toBe(true);
    expect(matchesTemplate("Something else.", templates.retryableTransient)).toBe(false);
  });

  it("requires {diagnostic} in the user-correctable template", () => {
    expect(templateProblem(ErrorBucket.USER_CORRECTABLE, "Fix it.")).toMatch(/\{diagnostic\}/);
    expect(templateProblem(ErrorBucket.SESSION_TERMINATING, "Bye.")).toBeUndefined();
    expect(templateProblem(ErrorBucket.RETRYABLE_TRANSIENT, "  ")).toMatch(/empty/);
  });
});

describe("chat config", () => {
  it("defaults to the spec's wording", () => {
    expect(loadChatConfig({}).replies).toEqual(DEFAULT_REPLY_TEMPLATES);
  });

  it("takes templates per deployment from the environment", () => {
    const config = loadChatConfig({
      TRELLIS_CHAT_REPLY_SESSION_TERMINATING: "Diese Unterhaltung ist beendet.",
      TRELLIS_CHAT_REPLY_USER_CORRECTABLE: "Bitte korrigieren: {diagnostic}.",
    });
    expect(config.replies.sessionTerminating).toBe("Diese Unterhaltung ist beendet.");
    expect(config.replies.userCorrectable).toBe("Bitte korrigieren: {diagnostic}.");
    expect(config.replies.retryableTransient).toBe(DEFAULT_REPLY_TEMPLATES.retryableTransient);
  });

  it("refuses a user-correctable template without the diagnostic", () => {
    let caught: unknown;
    try {
      loadChatConfig({ TRELLIS_CHAT_REPLY_USER_CORRECTABLE: "Please fix your message." });
    } catch (error) {
      caught = error;
    }
    expect(isTrellisError(caught) && caught.reason).toBe("config_invalid");
    expect(String(caught)).toMatch(/TRELLIS_CHAT_REPLY_USER_CORRECTABLE must contain/);
  });
});

describe("outcomes", () => {
  const reply = chatToMessage({ role: "assistant", content: "hi" });

  it("maps COMPLETED to completed with the tail", () => {
    const task = create(TaskSchema, { id: "task_1", sessionId: "s", status: TaskStatus.COMPLETED });
    const outcome = outcomeFromTask(task, { templates, tail: [reply] });
    expect(outcome.kind.case).toBe("completed");
    expect(outcome.taskId).toBe("task_1");
    expect(outcome.kind.case === "completed" && outcome.kind.value.replies).toEqual([reply]);
    expect(outcome.kind.case === "completed" && outcome.kind.value.finalState).toBeUndefined();
  });

  it("maps an empty tail to completed with no replies (harness-chat §7)", () => {
    const task = create(TaskSchema, { id: "t", status: TaskStatus.COMPLETED });
    const outcome = outcomeFromTask(task, { templates, tail: [], finalState: [reply] });
    expect(outcome.kind.case === "completed" && outcome.kind.value.replies).toEqual([]);
    expect(outcome.kind.case === "completed" && outcome.kind.value.finalState?.messages).toEqual([
      reply,
    ]);
  });

  it("maps FAILED to errored with the category's bucket and reply", () => {
    const task = create(TaskSchema, {
      id: "t",
      sessionId: "s",
      status: TaskStatus.FAILED,
      failure: {
        category: "provider_invalid_request",
        message: "image too large",
        retryable: false,
      },
    });
    const outcome = outcomeFromTask(task, { templates, tail: [reply] });
    expect(outcome.kind.case).toBe("errored");
    if (outcome.kind.case !== "errored") return;
    expect(outcome.kind.value.errorBucket).toBe(ErrorBucket.USER_CORRECTABLE);
    expect(outcome.kind.value.errorCategory).toBe("provider_invalid_request");
    expect(outcome.kind.value.diagnostic).toBe("image too large");
    expect(textOf(outcome.kind.value.reply!)).toMatch(/couldn't be processed: image too large\./);
    expect(outcome.kind.value.partialReplies).toEqual([reply]);
  });

  it("maps INPUT_REQUIRED / AUTH_REQUIRED to suspended with the task as invocation", () => {
    for (const [status, kind] of [
      [TaskStatus.INPUT_REQUIRED, SuspensionKind.INPUT],
      [TaskStatus.AUTH_REQUIRED, SuspensionKind.AUTH],
    ] as const) {
      const task = create(TaskSchema, {
        id: "task_9",
        status,
        suspension: { signalId: "task_9:approval", metadata: { kind: "approval" } },
      });
      const outcome = outcomeFromTask(task, { templates, tail: [reply] });
      expect(outcome.kind.case).toBe("suspended");
      if (outcome.kind.case !== "suspended") return;
      expect(outcome.kind.value.invocationId).toBe("task_9");
      expect(outcome.kind.value.pendingMessages).toEqual([reply]);
      // The author's id, and the task-unique one beside it.
      expect(outcome.kind.value.signalDescriptor?.signalId).toBe("approval");
      expect(outcome.kind.value.signalDescriptor?.globalSignalId).toBe("task_9:approval");
      expect(outcome.kind.value.signalDescriptor?.kind).toBe(kind);
      expect(outcome.kind.value.signalDescriptor?.metadata).toEqual({ kind: "approval" });
    }
  });

  it("refuses a task that has not settled", () => {
    const task = create(TaskSchema, { id: "t", status: TaskStatus.WORKING });
    expect(() => outcomeFromTask(task, { templates, tail: [] })).toThrow(/not settled/);
  });

  it("answers a shape problem with user_correctable / chat_message_shape_invalid", () => {
    const outcome = shapeInvalidOutcome(
      "s",
      { path: "message.role", message: "role must be one of system, user, assistant, tool" },
      templates,
    );
    expect(outcome.taskId).toBe("");
    expect(outcome.kind.case === "errored" && outcome.kind.value.errorCategory).toBe(
      "chat_message_shape_invalid",
    );
    expect(outcome.kind.case === "errored" && textOf(outcome.kind.value.reply!)).toBe(
      "That request couldn't be processed: message.role: role must be one of system, user, assistant, tool. Please adjust your message and try again.",
    );
  });

  it("maps dispatch errors onto buckets", () => {
    const bucket = (f: Parameters<typeof outcomeFromDispatchError>[1]) => {
      const o = outcomeFromDispatchError("s", f, templates);
      return o?.kind.case === "errored"
        ? [o.kind.value.errorBucket, o.kind.value.errorCategory]
        : undefined;
    };
    expect(
      bucket({
        code: Code.NotFound,
        reason: "resource_not_found",
        metadata: { object: "session" },
        message: "m",
      }),
    ).toEqual([ErrorBucket.SESSION_TERMINATING, "session_load_failed"]);
    expect(
      bucket({
        code: Code.NotFound,
        reason: "resource_not_found",
        metadata: { object: "agent" },
        message: "m",
      }),
    ).toEqual([ErrorBucket.USER_CORRECTABLE, "resource_not_found"]);
    expect(
      bucket({
        code: Code.Aborted,
        reason: "conflict",
        metadata: { session_id: "s", session_state: "CLOSED" },
        message: "session s is CLOSED",
      }),
    ).toEqual([ErrorBucket.SESSION_TERMINATING, "session_closed"]);
    expect(bucket({ code: Code.Unavailable, message: "down" })).toEqual([
      ErrorBucket.RETRYABLE_TRANSIENT,
      "upstream_unavailable",
    ]);
    // The callee's process died mid-call: its stream reads as CANCEL.
    expect(
      bucket({ code: Code.Canceled, message: "http/2 stream closed with error code CANCEL (0x8)" }),
    ).toEqual([ErrorBucket.RETRYABLE_TRANSIENT, "upstream_unavailable"]);
    expect(bucket({ code: Code.Internal, message: "boom" })).toEqual([
      ErrorBucket.RETRYABLE_TRANSIENT,
      "internal_error",
    ]);
    expect(bucket({ code: Code.Unauthenticated, message: "who?" })).toBeUndefined();
    // Too large is the user's to fix, though it travels as ResourceExhausted.
    expect(
      bucket({ code: Code.ResourceExhausted, reason: "payload_too_large", message: "too big" }),
    ).toEqual([ErrorBucket.USER_CORRECTABLE, "payload_too_large"]);
    expect(
      bucket({ code: Code.ResourceExhausted, reason: "rate_limited", message: "slow" }),
    ).toEqual([ErrorBucket.RETRYABLE_TRANSIENT, "rate_limited"]);
  });
});
