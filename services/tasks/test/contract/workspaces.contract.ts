/**
 * Tasks service contract: workspaces, agent ids per workspace and
 * artifacts.
 */
import { createHash } from "node:crypto";
import { SessionState, TaskStatus } from "@trellis/contracts/core";
import { eventually } from "@trellis/testkit";
import { beforeAll, describe, expect, it } from "vitest";
import { expectReason, text, textOf, watchUntil } from "../support/fixtures.js";
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

  describe("session ids per workspace", () => {
    it("lets two workspaces use one session id, neither learning of the other, each keeping its own", async () => {
      const carol = h.as({ actorId: "carol", workspaceId: "ws_carol" });
      const dave = h.as({ actorId: "dave", workspaceId: "ws_dave" });
      const id = `ses_standup_${Date.now()}`;
      const mine = await carol.sessions.createSession({
        sessionId: id,
        initialMessages: [text("carol's note")],
      });
      expect(mine.session?.workspaceId).toBe("ws_carol");
      // Another workspace takes the same id: no conflict, nothing revealed.
      const theirs = await dave.sessions.createSession({ sessionId: id });
      expect(theirs.session?.workspaceId).toBe("ws_dave");
      expect(theirs.session?.messageCount).toBe(0n);
      // Within one workspace the id stays unique.
      await expectReason(carol.sessions.createSession({ sessionId: id }), "conflict");

      const textsOf = async (who: typeof carol) =>
        (await who.sessions.listMessages({ sessionId: id, pageSize: 1000 })).messages.map((m) =>
          textOf(m.message),
        );
      // Each runs a turn in its own session.
      for (const [who, name] of [
        [carol, "carol"],
        [dave, "dave"],
      ] as const) {
        const { task } = await who.tasks.submitTask({ sessionId: id, input: text(`${name} asks`) });
        expect(task?.workspaceId).toBe(`ws_${name}`);
        const done = await watchUntil(who, task?.id as string);
        expect(done.task.status).toBe(TaskStatus.COMPLETED);
      }
      const carols = await textsOf(carol);
      const daves = await textsOf(dave);
      expect(carols.slice(0, 2)).toEqual(["carol's note", "carol asks"]);
      expect(daves[0]).toBe("dave asks");
      expect(carols.join("|")).not.toContain("dave");
      expect(daves.join("|")).not.toContain("carol");

      // Events stay apart.
      for (const [who, workspaceId] of [
        [carol, "ws_carol"],
        [dave, "ws_dave"],
      ] as const) {
        // The log is written behind the outbox in distributed mode.
        const events = await eventually(async () => {
          const { events } = await who.events.listEvents({ sessionId: id, limit: 1000 });
          return events.length > 0 ? events : undefined;
        });
        expect(new Set(events.map((e) => e.workspaceId))).toEqual(new Set([workspaceId]));
      }

      // Appending to, forking and truncating one leaves the other as it was.
      const before = (await carol.sessions.getSession({ sessionId: id })).session;
      await dave.sessions.appendMessage({ sessionId: id, message: text("dave appends") });
      expect((await textsOf(dave)).at(-1)).toBe("dave appends");
      expect(await textsOf(carol)).toEqual(carols);
      const fork = (await dave.sessions.forkSession({ sessionId: id })).session;
      expect(fork?.workspaceId).toBe("ws_dave");
      expect(fork?.parentSessionId).toBe(id);
      const forked = (await dave.sessions.listMessages({ sessionId: fork?.id as string })).messages;
      expect(forked.map((m) => textOf(m.message))).toEqual(await textsOf(dave));
      await dave.sessions.truncateSession({ sessionId: id, keepTurns: 0n });
      expect(await textsOf(dave)).toEqual([]);
      expect(await textsOf(carol)).toEqual(carols);
      await carol.sessions.closeSession({ sessionId: id });
      const after = (await dave.sessions.getSession({ sessionId: id })).session;
      expect(after?.workspaceId).toBe("ws_dave");
      expect(after?.state).toBe(SessionState.ACTIVE);
      expect((await carol.sessions.getSession({ sessionId: id })).session?.messageCount).toBe(
        before?.messageCount,
      );

      // A caller bound to no workspace names it; without a name, the oldest.
      expect((await h.sessions.getSession({ sessionId: id })).session?.workspaceId).toBe(
        "ws_carol",
      );
      expect(
        (await h.sessions.getSession({ sessionId: id, workspaceId: "ws_dave" })).session
          ?.workspaceId,
      ).toBe("ws_dave");
      // A confined caller reads its own only.
      await expectReason(
        dave.sessions.getSession({ sessionId: id, workspaceId: "ws_carol" }),
        "resource_not_found",
      );
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

    it("lists outcomes and artifacts by session and task, inside the caller's workspace", async () => {
      const erin = h.as({ actorId: "erin", workspaceId: "ws_erin" });
      const frank = h.as({ actorId: "frank", workspaceId: "ws_frank" });
      const sessionId = (await erin.sessions.createSession({})).session?.id as string;
      const taskId = (await erin.tasks.submitTask({ sessionId, input: text("list me") })).task
        ?.id as string;
      const done = await watchUntil(erin, taskId);
      const register = async (name: string, ofTask: string) =>
        (
          await erin.artifacts.registerArtifact({
            artifact: { sessionId, taskId: ofTask, name },
            content: new TextEncoder().encode(name),
          })
        ).artifact?.id;
      const ofTask = await register("of-task.txt", taskId);
      const ofSession = await register("of-session.txt", "");
      const artifactIds = async (filter: { sessionId?: string; taskId?: string }) =>
        (await erin.artifacts.listArtifacts(filter)).artifacts.map((a) => a.id);
      expect(await artifactIds({ sessionId })).toEqual([ofTask, ofSession]);
      expect(await artifactIds({ sessionId, taskId })).toEqual([ofTask]);
      expect((await erin.outcomes.listOutcomes({ taskId })).outcomes.map((o) => o.id)).toEqual([
        done.task.outcomeId,
      ]);
      // A caller of another workspace lists none of them, even naming this one.
      expect(
        (await frank.artifacts.listArtifacts({ workspaceId: "ws_erin", sessionId })).artifacts,
      ).toEqual([]);
      expect(
        (await frank.outcomes.listOutcomes({ workspaceId: "ws_erin", taskId })).outcomes,
      ).toEqual([]);
    });
  });
}
