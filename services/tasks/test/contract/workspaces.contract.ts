/**
 * Tasks service contract: workspaces, agent ids per workspace and
 * artifacts.
 */
import { createHash } from "node:crypto";
import { TaskStatus } from "@trellis/contracts/core";
import { eventually } from "@trellis/testkit";
import { beforeAll, describe, expect, it } from "vitest";
import { expectReason, text, watchUntil } from "../support/fixtures.js";
import type { TasksHarness } from "../support/harness.js";
import type { TasksSuite } from "./suite.js";

export function describeWorkspaces(suite: TasksSuite): void {
  const { newSession } = suite;
  // The harness exists once the suite's beforeAll ran; bind it for the tests below.
  let h: TasksHarness;
  beforeAll(() => {
    h = suite.h;
  });

  describe("workspaces", () => {
    it("keeps callers inside their workspace and never reveals other workspaces' resources", async () => {
      const alice = h.as({ actorId: "alice", workspaceId: "ws_alice" });
      const bob = h.as({ actorId: "bob", workspaceId: "ws_bob" });
      const { session } = await alice.sessions.createSession({});
      expect(session?.workspaceId).toBe("ws_alice");
      const { task } = await alice.tasks.submitTask({
        sessionId: session?.id as string,
        input: text("mine"),
      });
      expect(task?.createdBy).toBe("alice");
      const done = await watchUntil(alice, task?.id as string);
      expect(done.task.status).toBe(TaskStatus.COMPLETED);
      await expectReason(
        bob.sessions.getSession({ sessionId: session?.id as string }),
        "resource_not_found",
      );
      await expectReason(bob.tasks.getTask({ taskId: task?.id as string }), "resource_not_found");
      await expectReason(
        bob.tasks.cancelTask({ taskId: task?.id as string }),
        "resource_not_found",
      );
      await expectReason(
        bob.tasks.submitTask({ sessionId: session?.id as string, input: text("theirs") }),
        "resource_not_found",
      );
      await expectReason(
        bob.events.listEvents({ taskId: task?.id as string }),
        "resource_not_found",
      );
      await expectReason(
        bob.outcomes.getOutcome({ outcomeId: done.task.outcomeId }),
        "resource_not_found",
      );
      await expectReason(
        bob.sessions.createSession({ workspaceId: "ws_alice" }),
        "resource_not_found",
      );
      expect((await bob.sessions.listSessions({})).sessions).toEqual([]);
      expect(
        (await alice.sessions.listSessions({ workspaceId: "ws_bob" })).sessions.map((s) => s.id),
      ).toEqual([session?.id]);
      const events = await eventually(async () => {
        const { events } = await alice.events.listEvents({ taskId: task?.id as string });
        return events.length >= 5 ? events : undefined;
      });
      expect(events[0]?.actor?.id).toBe("alice");
      // Internal calls (no caller) see everything.
      expect((await h.tasks.getTask({ taskId: task?.id as string })).task?.workspaceId).toBe(
        "ws_alice",
      );
    });
  });

  describe("agent ids per workspace", () => {
    it("lets two workspaces use one agent id, neither learning of the other, each running its own", async () => {
      const carol = h.as({ actorId: "carol", workspaceId: "ws_carol" });
      const dave = h.as({ actorId: "dave", workspaceId: "ws_dave" });
      const id = `agent_standup_${Date.now()}`;
      const make = (who: typeof carol, reply: string) =>
        who.agents.createAgent({
          agent: {
            id,
            name: "standup",
            backend: "scripted",
            definition: {
              entry: "reply",
              nodes: { reply: { update: { messages: [{ role: "assistant", content: reply }] } } },
              edges: [{ from: "reply", to: "END" }],
            },
          },
        });
      expect((await make(carol, "carol's")).agent?.workspaceId).toBe("ws_carol");
      // Another workspace takes the same id: no conflict, nothing revealed.
      expect((await make(dave, "dave's")).agent?.workspaceId).toBe("ws_dave");
      // Within one workspace the id stays unique.
      await expectReason(make(carol, "again"), "conflict");
      expect((await dave.agents.getAgent({ agentId: id })).agent?.workspaceId).toBe("ws_dave");
      // A session names the agent of its own workspace.
      for (const [who, reply] of [
        [carol, "carol's"],
        [dave, "dave's"],
      ] as const) {
        const { session } = await who.sessions.createSession({ agentId: id });
        const { task } = await who.tasks.submitTask({
          sessionId: session?.id as string,
          input: text("hi"),
        });
        const done = await watchUntil(who, task?.id as string);
        expect(done.task.status).toBe(TaskStatus.COMPLETED);
        const { messages } = await who.sessions.listMessages({
          sessionId: session?.id as string,
        });
        const last = JSON.stringify(messages.at(-1), (_k, v: unknown) =>
          typeof v === "bigint" ? String(v) : v,
        );
        expect(last).toContain(reply);
      }
      // The built-in echo agent stays usable everywhere.
      const { session } = await carol.sessions.createSession({ agentId: "agent_echo" });
      expect(session?.agentId).toBe("agent_echo");
    });
  });

  describe("artifacts", () => {
    it("stores content in the database with its sha256 and size", async () => {
      const sessionId = await newSession();
      const content = new TextEncoder().encode("hello artifact");
      const { artifact } = await h.artifacts.registerArtifact({
        artifact: { sessionId, name: "note.txt", mimeType: "text/plain" },
        content,
      });
      expect(artifact?.sha256).toBe(`sha256:${createHash("sha256").update(content).digest("hex")}`);
      expect(artifact?.sizeBytes).toBe(BigInt(content.length));
      const body = await h.artifacts.getArtifactContent({ artifactId: artifact?.id as string });
      expect(new TextDecoder().decode(body.content)).toBe("hello artifact");
      expect(body.mimeType).toBe("text/plain");
      const { artifacts } = await h.artifacts.listArtifacts({ sessionId });
      expect(artifacts.map((a) => a.id)).toEqual([artifact?.id]);
      await expectReason(
        h.artifacts.registerArtifact({ artifact: { name: "empty" } }),
        "invalid_request",
      );
    });
  });
}
