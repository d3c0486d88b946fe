/**
 * ChatService handlers against stub tasks services, in memory
 * (createRouterTransport): what happens before and around the tasks calls.
 * The real end-to-end behaviour is in chat-conformance.test.ts.
 */
import { create } from "@bufbuild/protobuf";
import {
  Code,
  ConnectError,
  type ConnectRouter,
  createClient,
  createRouterTransport,
} from "@connectrpc/connect";
import { ChatService, ErrorBucket } from "@trellis/contracts/chat";
import { ErrorDetailSchema, MessageSchema, Role, TaskStatus } from "@trellis/contracts/core";
import { EventService, SessionService, TaskService } from "@trellis/contracts/tasks";
import { chatToMessage, textOf } from "@trellis/messages";
import type { ServiceClients } from "@trellis/platform";
import { createErrorInterceptor, createLogger } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import { loadChatConfig } from "../src/config.js";
import { createChatHandler } from "../src/handlers/chat-handler.js";
import { tasksPortOf } from "../src/handlers/tasks-port.js";

type Stub = (router: ConnectRouter, calls: string[]) => void;

function chatOver(stub: Stub, env: Record<string, string> = {}) {
  const calls: string[] = [];
  const tasksTransport = createRouterTransport((router) => stub(router, calls));
  const clients: ServiceClients = {
    get: (service) => createClient(service, tasksTransport),
  };
  const handler = createChatHandler({
    port: tasksPortOf(clients),
    config: loadChatConfig(env),
  });
  const logger = createLogger({ service: "chat-test", level: "error", write: () => {} });
  const transport = createRouterTransport((router) => router.service(ChatService, handler), {
    router: { interceptors: [createErrorInterceptor(logger)] },
  });
  return { chat: createClient(ChatService, transport), calls };
}

const unreachable: Stub = (router, calls) => {
  const fail = (name: string) => () => {
    calls.push(name);
    throw new ConnectError("tasks is down", Code.Unavailable);
  };
  router.service(TaskService, {
    submitTask: fail("SubmitTask"),
    watchTask: fail("WatchTask"),
    getTask: fail("GetTask"),
  });
  router.service(SessionService, {
    getSession: fail("GetSession"),
    listMessages: fail("ListMessages"),
  });
  router.service(EventService, {
    listEvents: fail("ListEvents"),
    streamEvents: fail("StreamEvents"),
  });
};

describe("Send before any session load (harness-chat §3.1, §5.1)", () => {
  const bad = [
    [
      "an unsupported content block",
      create(MessageSchema, { role: Role.USER, parts: [{ kind: { case: "json", value: {} } }] }),
      /unsupported content block type json/,
    ],
    [
      "an unknown role",
      create(MessageSchema, {
        role: Role.UNSPECIFIED,
        parts: [{ kind: { case: "text", value: { text: "x" } } }],
      }),
      /role must be one of/,
    ],
    [
      "a tool message without tool_call_id",
      chatToMessage({ role: "tool", content: "r" }),
      /tool_call_id/,
    ],
    [
      "an image in an assistant message",
      chatToMessage({
        role: "assistant",
        content: [{ type: "image", source: { type: "url", url: "u" } }],
      }),
      /only allowed in user/,
    ],
  ] as const;

  it.each(bad)(
    "answers %s with user_correctable / chat_message_shape_invalid",
    async (_, message, diagnostic) => {
      const { chat, calls } = chatOver(unreachable);
      const { outcome } = await chat.send({ sessionId: "s1", message });
      expect(calls).toEqual([]);
      expect(outcome?.kind.case).toBe("errored");
      if (outcome?.kind.case !== "errored") return;
      expect(outcome.kind.value.errorBucket).toBe(ErrorBucket.USER_CORRECTABLE);
      expect(outcome.kind.value.errorCategory).toBe("chat_message_shape_invalid");
      expect(outcome.kind.value.reply?.role).toBe(Role.SYSTEM);
      expect(textOf(outcome.kind.value.reply!)).toMatch(diagnostic);
      expect(outcome.taskId).toBe("");
    },
  );

  it("refuses an empty session id the same way", async () => {
    const { chat, calls } = chatOver(unreachable);
    const { outcome } = await chat.send({
      sessionId: "",
      message: chatToMessage({ role: "user", content: "hi" }),
    });
    expect(calls).toEqual([]);
    expect(outcome?.kind.case === "errored" && outcome.kind.value.errorCategory).toBe(
      "chat_message_shape_invalid",
    );
    expect(outcome?.kind.case === "errored" && textOf(outcome.kind.value.reply!)).toMatch(
      /session_id must not be empty/,
    );
  });

  it("refuses a missing message", async () => {
    const { chat } = chatOver(unreachable);
    const { outcome } = await chat.send({ sessionId: "s1" });
    expect(outcome?.kind.case === "errored" && outcome.kind.value.diagnostic).toBe(
      "message: a message is required",
    );
  });

  it("streams the same refusal as the one final outcome", async () => {
    const { chat } = chatOver(unreachable);
    const responses = [];
    for await (const r of chat.sendStreaming({
      sessionId: "s1",
      message: chatToMessage({ role: "robot", content: "x" }),
    }))
      responses.push(r);
    expect(responses.map((r) => r.kind.case)).toEqual(["outcome"]);
  });
});

describe("Send when the tasks service fails", () => {
  it("answers retryable_transient when tasks is unreachable", async () => {
    const { chat, calls } = chatOver(unreachable);
    const { outcome } = await chat.send({
      sessionId: "s1",
      message: chatToMessage({ role: "user", content: "hi" }),
    });
    expect(calls).toEqual(["SubmitTask"]);
    expect(outcome?.kind.case === "errored" && outcome.kind.value.errorBucket).toBe(
      ErrorBucket.RETRYABLE_TRANSIENT,
    );
    expect(outcome?.kind.case === "errored" && textOf(outcome.kind.value.reply!)).toBe(
      "I had trouble responding. Try again in a moment.",
    );
  });

  it("uses the deployment's reply templates", async () => {
    const { chat } = chatOver(unreachable, {
      TRELLIS_CHAT_REPLY_RETRYABLE_TRANSIENT: "Kurz warten, bitte.",
    });
    const { outcome } = await chat.send({
      sessionId: "s1",
      message: chatToMessage({ role: "user", content: "hi" }),
    });
    expect(outcome?.kind.case === "errored" && textOf(outcome.kind.value.reply!)).toBe(
      "Kurz warten, bitte.",
    );
  });

  it("answers session_load_failed when the bound session cannot be found", async () => {
    const { chat } = chatOver((router, calls) => {
      router.service(SessionService, {
        getSession() {
          calls.push("GetSession");
          return { session: { id: "s1", messageCount: 3n } };
        },
      });
      router.service(TaskService, {
        submitTask() {
          calls.push("SubmitTask");
          throw new ConnectError("session gone", Code.NotFound, undefined, [
            {
              desc: ErrorDetailSchema,
              value: { reason: "resource_not_found", metadata: { object: "session", id: "s1" } },
            },
          ]);
        },
      });
    });
    const { outcome } = await chat.send({
      sessionId: "s1",
      agentId: "a1",
      message: chatToMessage({ role: "user", content: "hi" }),
    });
    expect(
      outcome?.kind.case === "errored" && [
        outcome.kind.value.errorBucket,
        outcome.kind.value.errorCategory,
      ],
    ).toEqual([ErrorBucket.SESSION_TERMINATING, "session_load_failed"]);
  });

  it("keeps refusals of the caller's standing as RPC errors", async () => {
    const { chat } = chatOver((router) => {
      router.service(TaskService, {
        submitTask() {
          throw new ConnectError("no", Code.PermissionDenied);
        },
      });
    });
    await expect(
      chat.send({ sessionId: "s1", message: chatToMessage({ role: "user", content: "hi" }) }),
    ).rejects.toMatchObject({ code: Code.PermissionDenied });
  });
});

describe("Send dispatch", () => {
  /** `honourWait`: SubmitTask answers a waiting submit with the settled task, as the tasks service does. */
  function dispatching(existing: boolean, honourWait = false) {
    const submitted: unknown[] = [];
    const created: unknown[] = [];
    const harness = chatOver((router, calls) => {
      router.service(SessionService, {
        getSession() {
          calls.push("GetSession");
          if (existing) return { session: { id: "s1", messageCount: 2n } };
          throw new ConnectError("no session", Code.NotFound);
        },
        createSession(request) {
          calls.push("CreateSession");
          created.push({ sessionId: request.sessionId, agentId: request.agentId });
          return { session: { id: request.sessionId, agentId: request.agentId } };
        },
      });
      router.service(TaskService, {
        submitTask(request) {
          calls.push("SubmitTask");
          submitted.push({
            createSession: request.createSession,
            agentId: request.agentId,
            busyPolicy: request.busyPolicy,
            idempotencyKey: request.idempotencyKey,
            waitMs: request.waitMs,
          });
          if (honourWait && request.waitMs > 0) {
            return {
              task: {
                id: "task_1",
                sessionId: "s1",
                status: TaskStatus.COMPLETED,
                output: [chatToMessage({ role: "assistant", content: "waited" })],
              },
            };
          }
          return { task: { id: "task_1", sessionId: "s1", status: TaskStatus.SUBMITTED } };
        },
        async *watchTask() {
          calls.push("WatchTask");
          yield { task: { id: "task_1", sessionId: "s1", status: TaskStatus.WORKING } };
          yield {
            task: {
              id: "task_1",
              sessionId: "s1",
              status: TaskStatus.COMPLETED,
              output: [chatToMessage({ role: "assistant", content: "hello" })],
            },
          };
        },
      });
    });
    return { ...harness, submitted, created };
  }
  const send = {
    sessionId: "s1",
    agentId: "agent_1",
    idempotencyKey: "k1",
    message: chatToMessage({ role: "user", content: "hi" }),
  };

  it("submits into the mailbox with the agent to bind a new session to, maps the settled task", async () => {
    const { chat, calls, submitted, created } = dispatching(false);
    const { outcome } = await chat.send(send);
    // No session read: SubmitTask gets or creates the session (bound to agent_id).
    expect(calls).toEqual(["SubmitTask", "WatchTask"]);
    expect(created).toEqual([]);
    expect(submitted).toEqual([
      {
        createSession: true,
        agentId: "agent_1",
        busyPolicy: 1,
        idempotencyKey: "k1",
        waitMs: 60_000,
      },
    ]);
    expect(outcome?.taskId).toBe("task_1");
    expect(outcome?.kind.case === "completed" && outcome.kind.value.replies.map(textOf)).toEqual([
      "hello",
    ]);
  });

  it("submits the same request on the existing-session path (idempotent retries stay identical)", async () => {
    const fresh = dispatching(false);
    const existing = dispatching(true);
    await fresh.chat.send(send);
    await existing.chat.send(send);
    expect(existing.calls).toEqual(["SubmitTask", "WatchTask"]);
    expect(existing.submitted).toEqual(fresh.submitted);
  });

  it("takes a settled task from SubmitTask's wait without a WatchTask; streaming does not wait", async () => {
    const { chat, calls, submitted } = dispatching(false, true);
    const { outcome } = await chat.send(send);
    expect(calls).toEqual(["SubmitTask"]);
    expect(outcome?.kind.case === "completed" && outcome.kind.value.replies.map(textOf)).toEqual([
      "waited",
    ]);
    // SendStreaming follows the task's events instead: it does not wait.
    for await (const _ of chat.sendStreaming(send)) {
      // drained
    }
    expect(submitted.map((s) => (s as { waitMs: number }).waitMs)).toEqual([60_000, 0]);
  });

  it("never loads the session, with or without an agent", async () => {
    const { chat, calls } = dispatching(false);
    await chat.send({ ...send, agentId: "" });
    expect(calls).toEqual(["SubmitTask", "WatchTask"]);
  });
});

describe("GetHistory and Subscribe arguments", () => {
  it("refuse an empty session id with InvalidArgument", async () => {
    const { chat } = chatOver(unreachable);
    await expect(chat.getHistory({ sessionId: "" })).rejects.toMatchObject({
      code: Code.InvalidArgument,
    });
    await expect(async () => {
      for await (const _ of chat.subscribe({ sessionId: "" })) break;
    }).rejects.toMatchObject({ code: Code.InvalidArgument });
  });
});
