/**
 * Conformance flows of what a run leaves behind: replay, receipts and
 * outcomes. Each starts by creating a workspace and works in it.
 */
import { describe, expect, it } from "vitest";
import { type HarnClient, type Json, poll } from "./client.js";
import {
  expectError,
  newKey,
  newPersona,
  newSession,
  newWorkspace,
  submit,
  waitTask,
} from "./steps.js";

/** The text of every message of a session, in order. */
async function texts(api: HarnClient, sessionId: string): Promise<string[]> {
  const reply = await api.get(`/v1/sessions/${sessionId}/messages?limit=200`);
  return reply.json.data.map((m: Json) => `${m.role}:${m.parts[0]?.text ?? ""}`);
}

export function replayFlows(api: () => HarnClient): void {
  describe("replay", () => {
    it("replays a task into a new task that names its source and reproduces it", async () => {
      const workspaceId = await newWorkspace(api(), "replay");
      const sessionId = await newSession(api(), workspaceId);
      const source = await submit(api(), sessionId, "replay me");
      expect((await waitTask(api(), source.id)).status).toBe("COMPLETED");

      const replay = await api().post(`/v1/tasks/${source.id}/replay`, { mode: "exact" });
      expect([201, 202], replay.text).toContain(replay.status);
      expect(replay.json).toMatchObject({ object: "task", parent_task_id: source.id });
      expect(replay.json.workspace_id).toBe(workspaceId);
      const done = await waitTask(api(), replay.json.id);
      expect(done.status).toBe("COMPLETED");
      expect(await texts(api(), replay.json.session_id)).toEqual(await texts(api(), sessionId));

      const events = await api().get(`/v1/tasks/${replay.json.id}/events?limit=200`);
      const kinds: string[] = events.json.data.map((e: Json) => e.event);
      expect(kinds).toContain("replay.started");
      expect(kinds).toContain("replay.completed");
    });

    it("refuses bad replay requests and hides other workspaces' tasks", async () => {
      const workspaceId = await newWorkspace(api(), "replay-bad");
      const source = await submit(api(), await newSession(api(), workspaceId), "source");
      await waitTask(api(), source.id);
      const badMode = await api().post(`/v1/tasks/${source.id}/replay`, { mode: "rewind" });
      expectError(badMode, 400, "invalid_request");
      expect(badMode.json.error.param).toBe("mode");
      const outsider = api().as(
        await newKey(api(), await newWorkspace(api(), "replay-outsider"), ["tasks:write"]),
      );
      expectError(
        await outsider.post(`/v1/tasks/${source.id}/replay`, {}),
        404,
        "resource_not_found",
      );
    });
  });
}

export function receiptFlows(api: () => HarnClient): void {
  describe("receipts", () => {
    it("issues a receipt for a finished task that verifies", async () => {
      const workspaceId = await newWorkspace(api(), "receipts");
      const task = await submit(api(), await newSession(api(), workspaceId), "give me a receipt");
      await waitTask(api(), task.id);
      const receipts = await poll("the task's receipt", async () => {
        const reply = await api().get(`/v1/tasks/${task.id}/receipts`);
        expect(reply.status, reply.text).toBe(200);
        return reply.json.data.length > 0 ? reply.json.data : undefined;
      });
      const receipt = receipts[0];
      expect(receipt).toMatchObject({
        object: "receipt",
        subject: { object: "task", id: task.id },
      });
      // The task names its receipt once it is issued (issue 22).
      const read = await api().get(`/v1/tasks/${task.id}`);
      expect(read.json.receipt_id).toBe(receipt.id);
      const got = await api().get(`/v1/receipts/${receipt.id}`);
      expect(got.status).toBe(200);
      expect(got.json.id).toBe(receipt.id);
      expect(JSON.stringify(got.json)).toContain("receipt-2026-04-25");
      const verified = await api().post(`/v1/receipts/${receipt.id}/verify`, {});
      expect(verified.status, verified.text).toBe(200);
      expect(verified.json.valid).toBe(true);

      const outsider = api().as(
        await newKey(api(), await newWorkspace(api(), "receipts-outsider"), ["receipts:read"]),
      );
      expectError(await outsider.get(`/v1/receipts/${receipt.id}`), 404, "resource_not_found");
    });
  });
}

export function outcomeFlows(api: () => HarnClient): void {
  describe("outcomes", () => {
    it("records a succeeded outcome for a completed task", async () => {
      const workspaceId = await newWorkspace(api(), "outcomes");
      const task = await submit(api(), await newSession(api(), workspaceId), "outcome please");
      const done = await waitTask(api(), task.id);
      expect(done.status).toBe("COMPLETED");
      expect(done.outcome_id).toEqual(expect.any(String));
      const outcome = await api().get(`/v1/outcomes/${done.outcome_id}`);
      expect(outcome.status, outcome.text).toBe(200);
      expect(outcome.json).toMatchObject({
        object: "outcome",
        task_id: task.id,
        status: "SUCCEEDED",
      });
      const listed = await api().get(`/v1/outcomes?task_id=${task.id}`);
      expect(listed.json.data.map((o: Json) => o.id)).toEqual([done.outcome_id]);
    });

    it("records a canceled outcome that no later success replaces", async () => {
      const workspaceId = await newWorkspace(api(), "outcomes-cancel");
      const personaId = await newPersona(api(), workspaceId, "slow");
      const task = await submit(api(), await newSession(api(), workspaceId, personaId), "slowly");
      await waitTask(api(), task.id, (t) => t.status === "WORKING");
      await api().post(`/v1/tasks/${task.id}/cancel`, { reason: "conformance" });
      const done = await waitTask(api(), task.id);
      expect(done.status).toBe("CANCELED");
      const listed = await poll("the canceled outcome", async () => {
        const reply = await api().get(`/v1/outcomes?task_id=${task.id}`);
        return reply.json.data.length > 0 ? reply.json.data : undefined;
      });
      expect(listed.map((o: Json) => o.status)).toEqual(["CANCELED"]);
      const outsider = api().as(
        await newKey(api(), await newWorkspace(api(), "outcomes-outsider"), ["tasks:read"]),
      );
      expectError(await outsider.get(`/v1/outcomes/${listed[0].id}`), 404, "resource_not_found");
    });
  });
}
