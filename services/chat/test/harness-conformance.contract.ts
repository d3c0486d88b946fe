/**
 * The harness conformance fixtures (OpenArmature harness spec: dispatch paths
 * §3, outcomes §5, signal coordinator §6) through the chat surface: each
 * fixture's graph as the fixture writes it (its `state.fields`, reducers,
 * `suspend_with_descriptor`, `raises`), run as a scripted agent, with the
 * fixture's `final_state` checked and its signals delivered by the id the
 * graph's author wrote. Fixture 011 (stateless mode) has no chat form: chat
 * is sessioned only (harness-chat §1); 008 is chat scenario 7.
 */

import { Code } from "@connectrpc/connect";
import { ErrorBucket, type SubscribeResponse, SuspensionKind } from "@trellis/contracts/chat";
import { gateGraph } from "@trellis/execution/testing";
import { chatToMessage } from "@trellis/messages";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ChatTarget } from "./chat-conformance.contract.js";
import {
  approveResumed,
  type ChatClients,
  outcomeVariant,
  payload,
  type StreamReader,
  scriptedAgent,
  subscribeReader,
} from "./support.js";

let n = 0;
const newSession = () => `ses_harness_${Date.now().toString(36)}_${++n}`;
const hello = chatToMessage({ role: "user", content: "hello" });

/** The harness fixtures through ChatService, in `mode`. */
export function describeHarnessConformance(mode: string, start: ChatTarget): void {
  let h: ChatClients;
  const send = async (sessionId: string, agentId: string) =>
    (await h.chat.send({ sessionId, agentId, message: hello, includeFinalState: true })).outcome;
  const listen = (sessionId: string) => subscribeReader(h, { sessionId, includeFinalState: true });
  /** A new session of `agentId`, with a subscriber on it that has seen `subscribed`. */
  async function listenedSession(agentId: string) {
    const sessionId = newSession();
    // Subscribe answers NotFound for a session that does not exist: create it first.
    await h.sessions.createSession({ sessionId, agentId });
    const listener = listen(sessionId);
    expect((await listener.next()).kind.case).toBe("subscribed");
    return { sessionId, listener };
  }
  /**
   * Approves a {@link gateGraph} turn paused in `sessionId` by its author's
   * `signalId`: the signal reaches that turn, whose resumed outcome (read by
   * `listener`) completes with the payload in its state.
   */
  async function approveGate(
    sessionId: string,
    signalId: string,
    paused: { invocationId: string },
    listener: StreamReader<SubscribeResponse>,
  ) {
    const resumed = await approveResumed(h, listener, {
      sessionId,
      signalId,
      taskId: paused.invocationId,
    });
    expect(outcomeVariant(resumed, "completed").finalState?.state).toEqual({
      approved: true,
      completed_flag: true,
    });
  }

  describe(`harness conformance fixtures (${mode})`, () => {
    beforeAll(async () => {
      h = await start();
    });
    afterAll(async () => {
      await h?.close();
    });

    it("001 new session: the graph's update replaces the declared field", async () => {
      const agentId = await scriptedAgent(h, "h001", {
        state: { fields: { message_count: { type: "int", default: 0 } } },
        entry: "increment",
        nodes: { increment: { update: { message_count: 1 } } },
        edges: [{ from: "increment", to: "END" }],
      });
      const done = outcomeVariant(await send(newSession(), agentId), "completed");
      expect(done.finalState?.state).toEqual({ message_count: 1 });
    });

    it("002 existing session: the second turn loads the first's state (append reducer)", async () => {
      const agentId = await scriptedAgent(h, "h002", {
        state: { fields: { message_count: { type: "list<int>", reducer: "append", default: [] } } },
        entry: "append_one",
        nodes: { append_one: { update: { message_count: [1] } } },
        edges: [{ from: "append_one", to: "END" }],
      });
      const sessionId = newSession();
      const first = outcomeVariant(await send(sessionId, agentId), "completed");
      expect(first.finalState?.state).toEqual({ message_count: [1] });
      const second = outcomeVariant(await send(sessionId, agentId), "completed");
      expect(second.finalState?.state).toEqual({ message_count: [1, 1] });
    });

    it("003 signal resume: the payload reaches the state, the graph completes", async () => {
      const agentId = await scriptedAgent(h, "h003", gateGraph("approval-test-001"));
      const { sessionId, listener } = await listenedSession(agentId);
      const paused = outcomeVariant(await send(sessionId, agentId), "suspended");
      expect(paused.signalDescriptor?.signalId).toBe("approval-test-001");
      await approveGate(sessionId, "approval-test-001", paused, listener);
      listener.close();
    });

    it("004 completed: the final state carries the computed value", async () => {
      const agentId = await scriptedAgent(h, "h004", {
        state: { fields: { value: { type: "int", default: 0 } } },
        entry: "compute",
        nodes: { compute: { update: { value: 42 } } },
        edges: [{ from: "compute", to: "END" }],
      });
      const done = outcomeVariant(await send(newSession(), agentId), "completed");
      expect(done.finalState?.state).toEqual({ value: 42 });
    });

    it("005 / 009 / 010 errored: category and bucket of the node's raise", async () => {
      const cases = [
        [
          "provider_unavailable",
          "provider temporarily unreachable",
          ErrorBucket.RETRYABLE_TRANSIENT,
        ],
        [
          "provider_invalid_request",
          "model 'gpt-NONEXISTENT' not found",
          ErrorBucket.USER_CORRECTABLE,
        ],
      ] as const;
      for (const [category, message, bucket] of cases) {
        const agentId = await scriptedAgent(h, `h-${category}`, {
          state: { fields: { v: { type: "int", default: 0 } } },
          entry: "failing_node",
          nodes: { failing_node: { raises: { category, message } } },
          edges: [{ from: "failing_node", to: "END" }],
        });
        const failure = outcomeVariant(await send(newSession(), agentId), "errored");
        expect(failure.errorCategory).toBe(category);
        expect(failure.errorBucket).toBe(bucket);
        expect(failure.diagnostic).toBe(message);
      }
    });

    it("006 suspended: the descriptor as the author wrote it, at once", async () => {
      const agentId = await scriptedAgent(h, "h006", {
        state: { fields: { v: { type: "int", default: 0 } } },
        entry: "gate",
        nodes: {
          gate: {
            suspend_with_descriptor: {
              signal_id: "approval-suspended-test",
              metadata: { kind: "approval" },
            },
          },
        },
        edges: [{ from: "gate", to: "END" }],
      });
      const started = Date.now();
      const outcome = await send(newSession(), agentId);
      const paused = outcomeVariant(outcome, "suspended");
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(paused.signalDescriptor?.signalId).toBe("approval-suspended-test");
      expect(paused.signalDescriptor?.metadata).toEqual({ kind: "approval" });
      expect(paused.signalDescriptor?.kind).toBe(SuspensionKind.INPUT);
      expect(paused.signalDescriptor?.globalSignalId).toBe(
        `${outcome?.taskId}:approval-suspended-test`,
      );
    });

    it("007 signal coordinator round trip: the signal id resolves to the paused invocation", async () => {
      const agentId = await scriptedAgent(h, "h007", gateGraph("roundtrip-approval-001"));
      const { sessionId, listener } = await listenedSession(agentId);
      const paused = outcomeVariant(await send(sessionId, agentId), "suspended");
      await approveGate(sessionId, "roundtrip-approval-001", paused, listener);
      // The same id again finds nothing waiting.
      await expect(
        h.signals.deliver({ sessionId, signalId: "roundtrip-approval-001", payload: payload({}) }),
      ).rejects.toMatchObject({ rawMessage: expect.stringContaining("roundtrip-approval-001") });
      listener.close();
    });

    it("signal ids: by session and label, by label alone when unambiguous, by the task-unique id", async () => {
      const agentId = await scriptedAgent(h, "h-ids", gateGraph("approve-ids"));
      const sessionId = newSession();
      const older = outcomeVariant(await send(sessionId, agentId), "suspended");
      const newer = outcomeVariant(await send(sessionId, agentId), "suspended");
      expect(newer.invocationId).not.toBe(older.invocationId);
      // Two turns wait on the label: without the session it is ambiguous.
      await expect(
        h.signals.deliver({ signalId: "approve-ids", payload: payload({ approved: true }) }),
      ).rejects.toMatchObject({ code: Code.InvalidArgument });
      // By label within the session: the turn that suspended last.
      const first = await h.signals.deliver({
        sessionId,
        signalId: "approve-ids",
        payload: payload({ approved: true }),
      });
      expect(first.taskId).toBe(newer.invocationId);
      // Now one turn waits on it: the label alone reaches it.
      const second = await h.signals.deliver({
        signalId: "approve-ids",
        payload: payload({ approved: true }),
      });
      expect(second.taskId).toBe(older.invocationId);
      // The task-unique id alone (existing clients) reaches exactly its turn.
      const third = outcomeVariant(await send(sessionId, agentId), "suspended");
      const byGlobal = await h.signals.deliver({
        signalId: third.signalDescriptor?.globalSignalId ?? "",
        payload: payload({ approved: true }),
      });
      expect(byGlobal.taskId).toBe(third.invocationId);
      // Nothing waits any more.
      await expect(
        h.signals.deliver({ sessionId, signalId: "approve-ids", payload: payload({}) }),
      ).rejects.toMatchObject({ code: Code.NotFound });
    });
  });
}
