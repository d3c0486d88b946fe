/**
 * The ten conformance scenarios of proposal 0056 §3 as a shared suite: against
 * ChatService over gRPC on a real socket, with the real tasks service running
 * scripted graph agents registered through AgentService.CreateAgent. Each
 * mode (embedded, distributed) runs it with its own harness factory.
 */
import { create } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { type ChatTurnOutcome, ErrorBucket, SuspensionKind } from "@trellis/contracts/chat";
import { MessageSchema, Role } from "@trellis/contracts/core";
import { type ChatMessageJson, chatToMessage, messageToChat, textOf } from "@trellis/messages";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DEFAULT_REPLY_TEMPLATES, matchesTemplate } from "../src/domain/replies.js";
import {
  approvalGraph,
  approveResumed,
  type ChatClients,
  outcomeVariant,
  raiseGraph,
  replyGraph,
  scriptedAgent,
  subscribeReader,
} from "./support.js";

/** Starts the mesh under test (tasks + chat) and returns clients of it. */
export type ChatTarget = () => Promise<ChatClients>;

let n = 0;
const newSession = () => `ses_chat_${Date.now().toString(36)}_${++n}`;
const user = (content: ChatMessageJson["content"]) => chatToMessage({ role: "user", content });

/** The ten scenarios of proposal 0056 §3, in `mode`, against the mesh `start` brings up. */
export function describeChatConformance(mode: string, start: ChatTarget): void {
  let h: ChatClients;
  const completed = (outcome: ChatTurnOutcome | undefined) => outcomeVariant(outcome, "completed");
  const errored = (outcome: ChatTurnOutcome | undefined) => outcomeVariant(outcome, "errored");
  const suspended = (outcome: ChatTurnOutcome | undefined) => outcomeVariant(outcome, "suspended");
  const chatJson = (messages: readonly import("@trellis/contracts/core").Message[]) =>
    messages.map((m) => messageToChat(m));

  async function history(sessionId: string) {
    return chatJson((await h.chat.getHistory({ sessionId })).messages);
  }

  const subscribe = (sessionId: string, afterCursor = "", includeFinalState = false) =>
    subscribeReader(h, { sessionId, afterCursor, includeFinalState });

  describe(`proposal 0056 §3: chat conformance (${mode})`, () => {
    beforeAll(async () => {
      h = await start();
    });
    afterAll(async () => {
      await h?.close();
    });

    it("1. basic send-and-reply: one reply, both messages in the session", async () => {
      const agentId = await scriptedAgent(
        h,
        "basic",
        replyGraph([{ role: "assistant", content: "Hello! You said: {{input}}" }]),
      );
      const sessionId = newSession();
      const { outcome } = await h.chat.send({
        sessionId,
        agentId,
        message: user("hi"),
        includeFinalState: true,
      });
      const done = completed(outcome);
      expect(chatJson(done.replies)).toEqual([
        { role: "assistant", content: "Hello! You said: hi" },
      ]);
      // final_state: both messages, and no other state field.
      expect(done.finalState?.messages).toHaveLength(2);
      expect(done.finalState?.state).toBeUndefined();
      expect(outcome?.sessionId).toBe(sessionId);
      expect(outcome?.taskId).not.toBe("");
      expect(await history(sessionId)).toEqual([
        { role: "user", content: "hi" },
        { role: "assistant", content: "Hello! You said: hi" },
      ]);
    });

    it("2. multi-turn: history accumulates; each turn replies only with its own messages", async () => {
      const agentId = await scriptedAgent(
        h,
        "echo",
        replyGraph([{ role: "assistant", content: "echo: {{input}}" }]),
      );
      const sessionId = newSession();
      for (const [i, text] of ["one", "two", "three"].entries()) {
        const { outcome } = await h.chat.send({
          sessionId,
          agentId,
          message: user(text),
          includeFinalState: true,
        });
        const done = completed(outcome);
        expect(chatJson(done.replies)).toEqual([{ role: "assistant", content: `echo: ${text}` }]);
        // Each turn observes the earlier turns' messages: 2, 4, 6.
        expect(chatJson(done.finalState?.messages ?? [])).toEqual(
          ["one", "two", "three"].slice(0, i + 1).flatMap((t) => [
            { role: "user", content: t },
            { role: "assistant", content: `echo: ${t}` },
          ]),
        );
      }
      expect(await history(sessionId)).toEqual(
        ["one", "two", "three"].flatMap((t) => [
          { role: "user", content: t },
          { role: "assistant", content: `echo: ${t}` },
        ]),
      );
      // The session keeps its bound agent: a later Send without agent_id uses it.
      const { outcome } = await h.chat.send({ sessionId, message: user("four") });
      expect(chatJson(completed(outcome).replies)).toEqual([
        { role: "assistant", content: "echo: four" },
      ]);
    });

    it("3. multi-message reply: tool call, tool result and final text, all roles, in order", async () => {
      const agentId = await scriptedAgent(
        h,
        "tool-loop",
        replyGraph([
          {
            role: "assistant",
            tool_calls: [{ id: "call_1", name: "get_weather", arguments: { city: "Oslo" } }],
          },
          { role: "tool", tool_call_id: "call_1", content: "4°C and cloudy" },
          { role: "assistant", content: "It's 4°C and cloudy in Oslo." },
        ]),
      );
      const sessionId = newSession();
      const { outcome } = await h.chat.send({
        sessionId,
        agentId,
        message: user("weather in Oslo?"),
        includeFinalState: true,
      });
      expect(completed(outcome).finalState?.messages).toHaveLength(4);
      expect(chatJson(completed(outcome).replies)).toEqual([
        {
          role: "assistant",
          tool_calls: [{ id: "call_1", name: "get_weather", arguments: { city: "Oslo" } }],
        },
        { role: "tool", tool_call_id: "call_1", content: "4°C and cloudy" },
        { role: "assistant", content: "It's 4°C and cloudy in Oslo." },
      ]);
      expect(await history(sessionId)).toHaveLength(4);
    });

    it("4. multimodal user message: text + image blocks thread into history", async () => {
      const agentId = await scriptedAgent(
        h,
        "vision",
        replyGraph([{ role: "assistant", content: "A cat on a sofa." }]),
      );
      const sessionId = newSession();
      const content: ChatMessageJson["content"] = [
        { type: "text", text: "What is in these pictures?" },
        { type: "image", source: { type: "url", url: "https://example.test/cat.png" } },
        {
          type: "image",
          source: { type: "inline", base64_data: "iVBORw0KGgo=" },
          media_type: "image/png",
          detail: "low",
        },
      ];
      const { outcome } = await h.chat.send({
        sessionId,
        agentId,
        message: user(content),
        includeFinalState: true,
      });
      expect(chatJson(completed(outcome).replies)).toEqual([
        { role: "assistant", content: "A cat on a sofa." },
      ]);
      expect(chatJson(completed(outcome).finalState?.messages ?? [])).toEqual([
        { role: "user", content },
        { role: "assistant", content: "A cat on a sofa." },
      ]);
      expect(await history(sessionId)).toEqual([
        { role: "user", content },
        { role: "assistant", content: "A cat on a sofa." },
      ]);
    });

    it("5. suspension with a pending message: Send returns at once with the descriptor", async () => {
      const agentId = await scriptedAgent(h, "approval-5", approvalGraph);
      const sessionId = newSession();
      const started = Date.now();
      const { outcome } = await h.chat.send({ sessionId, agentId, message: user("email Bob") });
      const paused = suspended(outcome);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(chatJson(paused.pendingMessages)).toEqual([
        { role: "assistant", content: "I'm waiting for approval to send this email." },
      ]);
      expect(paused.invocationId).toBe(outcome?.taskId);
      // The signal id as the graph's author wrote it; the task-unique one beside it.
      expect(paused.signalDescriptor?.signalId).toBe("approval");
      expect(paused.signalDescriptor?.globalSignalId).toBe(`${paused.invocationId}:approval`);
      expect(paused.signalDescriptor?.metadata).toEqual({ kind: "approval" });
      expect(paused.signalDescriptor?.kind).toBe(SuspensionKind.INPUT);
      // The turn holds nothing up: the session takes the next message at once.
      const next = await h.chat.send({ sessionId, message: user("are you there?") });
      expect(suspended(next.outcome).invocationId).not.toBe(paused.invocationId);
      expect((await history(sessionId)).map((m) => m.content)).toContain("are you there?");
    });

    it("6. suspend → signal → the subscribed listener gets the post-resume reply", async () => {
      const agentId = await scriptedAgent(h, "approval-6", approvalGraph);
      const sessionId = newSession();
      // Subscribe answers NotFound for a session that does not exist: create it first.
      await h.sessions.createSession({ sessionId, agentId });
      const listener = subscribe(sessionId, "", true);
      expect((await listener.next()).kind.case).toBe("subscribed");

      const { outcome } = await h.chat.send({ sessionId, agentId, message: user("email Bob") });
      const paused = suspended(outcome);
      // Never for the suspending turn itself.
      await listener.expectQuiet(300);

      // Delivered as a system outside Trellis knows it: the session and the
      // signal id the graph's author wrote.
      expect(paused.signalDescriptor?.signalId).toBe("approval");
      const result = await approveResumed(h, listener, {
        sessionId,
        signalId: "approval",
        taskId: paused.invocationId,
      });
      // Only the post-resume messages: the pending one was already returned by Send.
      expect(chatJson(completed(result).replies)).toEqual([
        { role: "assistant", content: "Email sent." },
      ]);
      // The state after the resumed turn: the user message, the pending one, the reply.
      expect(chatJson(completed(result).finalState?.messages ?? [])).toEqual([
        { role: "user", content: "email Bob" },
        { role: "assistant", content: "I'm waiting for approval to send this email." },
        { role: "assistant", content: "Email sent." },
      ]);
      expect(completed(result).finalState?.state).toEqual({ approved: true });
      await listener.expectQuiet(300);

      // The next Send gets its own reply; it does not consume the resume reply.
      const next = await h.chat.send({ sessionId, message: user("thanks") });
      expect(chatJson(suspended(next.outcome).pendingMessages)).toEqual([
        { role: "assistant", content: "I'm waiting for approval to send this email." },
      ]);
      // harness-chat §8.1: pending messages join the history at suspension; the
      // resumed turn's later messages follow them.
      expect((await history(sessionId)).map((m) => m.content)).toEqual([
        "email Bob",
        "I'm waiting for approval to send this email.",
        "Email sent.",
        "thanks",
        "I'm waiting for approval to send this email.",
      ]);
      listener.close();
    });

    it("7. session-terminating: session_load_failed → 'can't continue' reply", async () => {
      const agentId = await scriptedAgent(
        h,
        "broken-session",
        raiseGraph("session_load_failed", "the saved session state could not be read"),
      );
      const { outcome } = await h.chat.send({
        sessionId: newSession(),
        agentId,
        message: user("hi"),
      });
      const failure = errored(outcome);
      expect(failure.errorBucket).toBe(ErrorBucket.SESSION_TERMINATING);
      expect(failure.errorCategory).toBe("session_load_failed");
      expect(failure.reply?.role).toBe(Role.SYSTEM);
      expect(
        matchesTemplate(
          textOf(failure.reply!),
          "this conversation can't continue. please start a new one.",
        ),
      ).toBe(true);
    });

    it("8. retryable transient: provider_unavailable → 'try again in a moment' reply", async () => {
      const agentId = await scriptedAgent(
        h,
        "flaky-provider",
        raiseGraph("provider_unavailable", "upstream returned 503"),
      );
      const { outcome } = await h.chat.send({
        sessionId: newSession(),
        agentId,
        message: user("hi"),
      });
      const failure = errored(outcome);
      expect(failure.errorBucket).toBe(ErrorBucket.RETRYABLE_TRANSIENT);
      expect(failure.errorCategory).toBe("provider_unavailable");
      expect(failure.reply?.role).toBe(Role.SYSTEM);
      expect(textOf(failure.reply!)).toBe(DEFAULT_REPLY_TEMPLATES.retryableTransient);
    });

    it("9. user-correctable: provider_invalid_request → reply with the diagnostic", async () => {
      const agentId = await scriptedAgent(
        h,
        "picky-provider",
        raiseGraph(
          "provider_invalid_request",
          "the image is larger than the model accepts (20 MB)",
        ),
      );
      const { outcome } = await h.chat.send({
        sessionId: newSession(),
        agentId,
        message: user("hi"),
      });
      const failure = errored(outcome);
      expect(failure.errorBucket).toBe(ErrorBucket.USER_CORRECTABLE);
      expect(failure.errorCategory).toBe("provider_invalid_request");
      expect(failure.reply?.role).toBe(Role.SYSTEM);
      expect(textOf(failure.reply!)).toBe(
        "That request couldn't be processed: the image is larger than the model accepts (20 MB). Please adjust your message and try again.",
      );
    });

    it("10. chat_message_shape_invalid: an unsupported content block, refused before any session load", async () => {
      const sessionId = newSession();
      const message = create(MessageSchema, {
        role: Role.USER,
        parts: [
          { kind: { case: "text", value: { text: "see attached" } } },
          { kind: { case: "fileRef", value: { uri: "s3://bucket/report.pdf" } } },
        ],
      });
      const { outcome } = await h.chat.send({ sessionId, message });
      const failure = errored(outcome);
      expect(failure.errorBucket).toBe(ErrorBucket.USER_CORRECTABLE);
      expect(failure.errorCategory).toBe("chat_message_shape_invalid");
      expect(failure.reply?.role).toBe(Role.SYSTEM);
      expect(textOf(failure.reply!)).toMatch(
        /^That request couldn't be processed: message\.parts\[1\]: unsupported content block type fileRef/,
      );
      expect(outcome?.taskId).toBe("");
      // Nothing was dispatched: the session was never created.
      await expect(h.chat.getHistory({ sessionId })).rejects.toMatchObject({
        code: Code.NotFound,
      });
    });
  });
}
