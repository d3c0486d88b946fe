/**
 * Tasks service contract: the agent state a turn starts from is the state
 * the session's last turn left, whichever path wrote it (an owned finish,
 * or the relational write of a suspension).
 */
import { TaskStatus } from "@trellis/contracts/core";
import { beforeAll, describe, expect, it } from "vitest";
import { createAgent, text, textOf, watchUntil } from "../support/fixtures.js";
import type { TasksHarness } from "../support/harness.js";
import type { TasksSuite } from "./suite.js";

export function describeAgentState(suite: TasksSuite): void {
  const { newSession } = suite;
  // The harness exists once the suite's beforeAll ran; bind it for the tests below.
  let h: TasksHarness;
  beforeAll(() => {
    h = suite.h;
  });

  describe("agent state", () => {
    // One field appended by every run: a run's state shows what it started from.
    const counting = (suspend: boolean) => ({
      state: { fields: { runs: { type: "list<int>", reducer: "append", default: [] } } },
      entry: "count",
      nodes: {
        count: { update: { messages: [{ role: "assistant", content: "counted" }], runs: [1] } },
        ...(suspend
          ? {
              wait: { suspend: { signal_id: "go" } },
            }
          : {}),
      },
      edges: suspend ? [{ from: "count", to: "wait" }] : [{ from: "count", to: "END" }],
    });

    it("starts each turn from the state the session's last turn left", async () => {
      const agent = await createAgent(h, "state-counter", "scripted", counting(false));
      const sessionId = await newSession(agent);
      const states = [];
      for (const words of ["one", "two", "three"]) {
        const { task } = await h.tasks.submitTask({ sessionId, input: text(words) });
        const { task: done } = await watchUntil(h, task?.id as string);
        expect(done.status).toBe(TaskStatus.COMPLETED);
        states.push(done.state);
      }
      expect(states).toEqual([{ runs: [1] }, { runs: [1, 1] }, { runs: [1, 1, 1] }]);
    });

    it("starts from the state a suspended turn left (written by the relational path)", async () => {
      const agent = await createAgent(h, "state-suspender", "scripted", counting(true));
      const sessionId = await newSession(agent);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("one") });
      const { task: waiting } = await watchUntil(h, task?.id as string, () => false, {
        untilSettled: true,
      });
      expect(waiting.status).toBe(TaskStatus.INPUT_REQUIRED);
      expect(waiting.state).toEqual({ runs: [1] });
      await h.tasks.cancelTask({ taskId: task?.id as string });
      // The next turn starts from what the suspended run left.
      const next = await h.tasks.submitTask({ sessionId, input: text("two") });
      const { task: second } = await watchUntil(h, next.task?.id as string, () => false, {
        untilSettled: true,
      });
      expect(second.status).toBe(TaskStatus.INPUT_REQUIRED);
      expect(second.state).toEqual({ runs: [1, 1] });
    });

    it("resumes after the suspend node on a signal without payload, keeping the state", async () => {
      const agent = await createAgent(h, "state-resumer", "scripted", {
        state: { fields: { runs: { type: "list<int>", reducer: "append", default: [] } } },
        entry: "count",
        nodes: {
          count: { update: { messages: [{ role: "assistant", content: "counted" }], runs: [1] } },
          wait: { suspend: { signal_id: "go" } },
          after: { update: { messages: [{ role: "assistant", content: "after" }], runs: [2] } },
        },
        edges: [
          { from: "count", to: "wait" },
          { from: "wait", to: "after" },
          { from: "after", to: "END" },
        ],
      });
      const sessionId = await newSession(agent);
      const { task } = await h.tasks.submitTask({ sessionId, input: text("one") });
      const { task: waiting } = await watchUntil(h, task?.id as string, () => false, {
        untilSettled: true,
      });
      expect(waiting.status).toBe(TaskStatus.INPUT_REQUIRED);
      expect(waiting.suspension?.signalId).toBe(`${task?.id}:go`);
      expect(waiting.state).toEqual({ runs: [1] });
      await h.signals.deliver({ signalId: `${task?.id}:go`, deliveryId: "go-1" });
      const { task: done } = await watchUntil(h, task?.id as string);
      // The resumed run goes on to `after`: `count` does not run again.
      expect(done.status).toBe(TaskStatus.COMPLETED);
      expect(done.state).toEqual({ runs: [1, 2] });
      expect(done.output.map(textOf)).toEqual(["counted", "after"]);
    });
  });
}
