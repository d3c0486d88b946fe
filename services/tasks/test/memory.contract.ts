/**
 * Memory, one suite for both hosts (embedded: PGlite and the in-process log;
 * distributed: PostgreSQL and JetStream): the MemoryService's rules (scopes,
 * sizes, idempotency, workspaces), and runs of a built-in harness agent that
 * write memory in one session and read it in the next — recorded as
 * `agent.memory_write` / `agent.memory_read` events, never in a transcript —
 * and replays that give the value read at the time unless they ask for
 * refreshed memory.
 */
import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Client, Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { type Message, MessageSchema, Role, TaskStatus } from "@trellis/contracts/core";
import { MemoryScope, MemoryService, ReplayMode, type Task } from "@trellis/contracts/tasks";
import type { ModelProviderFactory, ModelResponse } from "@trellis/execution";
import { createHarnessAdapter, createLocalExecutor } from "@trellis/execution";
import {
  createMeshClientInterceptor,
  processMeshCredentials,
  setCallerHeaders,
} from "@trellis/platform";
import { errorDetailOf } from "@trellis/runtime";
import { callFailure } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAgent, text, textOf, watchUntil } from "./support/fixtures.js";
import type { TasksHarness, TasksTarget } from "./support/harness.js";

/**
 * A model that uses the memory tools: "remember <x>" writes x to the
 * persona's memory, "recall" reads it and answers with the newest record.
 */
const memoryModel: ModelProviderFactory = (model) => ({
  provider: "fake",
  model,
  async complete(request): Promise<ModelResponse> {
    const last = request.messages.at(-1) as Message;
    const answer = (message: Message): ModelResponse => ({
      message,
      finishReason: message.toolCalls.length > 0 ? "tool_calls" : "stop",
      usage: { promptTokens: 1, completionTokens: 1, totalTokens: 2 },
      raw: { fake: true },
      model,
    });
    if (last.role === Role.TOOL) {
      const result = JSON.parse(textOf(last) || "{}") as {
        memories?: { content: JsonValue }[];
        id?: string;
      };
      const reply = result.memories
        ? `recalled: ${JSON.stringify(result.memories[0]?.content ?? null)}`
        : `saved ${result.id ? "ok" : "?"}`;
      return answer(create(MessageSchema, { role: Role.ASSISTANT, parts: [textPart(reply)] }));
    }
    const input = textOf(last);
    const call: { name: string; args: JsonValue } = input.startsWith("remember ")
      ? { name: "memory_write", args: { scope: "persona", content: input.slice(9) } }
      : { name: "memory_read", args: { scope: "persona" } };
    return answer(
      create(MessageSchema, {
        role: Role.ASSISTANT,
        toolCalls: [
          { id: `call_${call.name}`, name: call.name, arguments: fromJson(ValueSchema, call.args) },
        ],
      }),
    );
  },
});

function textPart(value: string) {
  return { kind: { case: "text" as const, value: { text: value } } };
}

const settled = (t: Task) =>
  t.status === TaskStatus.COMPLETED ||
  t.status === TaskStatus.FAILED ||
  t.status === TaskStatus.CANCELED;

/** Registers the suite against a target. */
export function describeMemory(target: TasksTarget): void {
  describe(`memory (${target.name})`, () => {
    let h: TasksHarness;
    let memory: Client<typeof MemoryService>;
    let agentId: string;

    /** MemoryService as an authenticated caller of `workspaceId`. */
    function memoryAs(workspaceId: string, scopes: string[] = ["memory:read", "memory:write"]) {
      return createClient(
        MemoryService,
        createGrpcTransport({
          baseUrl: h.url,
          interceptors: [
            (next) => (req) => {
              setCallerHeaders(req.header, { actorId: "user_1", workspaceId, scopes });
              return next(req);
            },
            createMeshClientInterceptor(processMeshCredentials(), "test"),
          ],
        }),
      );
    }

    async function run(sessionId: string, input: string): Promise<Task> {
      const { task } = await h.tasks.submitTask({ sessionId, input: text(input) });
      return (await watchUntil(h, task?.id as string, settled, { untilSettled: true })).task;
    }

    async function replyOf(sessionId: string, at = -1): Promise<string> {
      const { messages } = await h.sessions.listMessages({ sessionId, pageSize: 100 });
      return textOf(messages.at(at)?.message);
    }

    async function eventsOf(taskId: string) {
      const { events } = await h.events.listEvents({ taskId, limit: 1000 });
      return events;
    }

    beforeAll(async () => {
      h = await target.start({
        executor: createLocalExecutor([createHarnessAdapter({ providers: { fake: memoryModel } })]),
      });
      memory = memoryAs("default");
      agentId = await createAgent(h, "memo", "harness", {
        provider: "fake",
        model: "m",
        tools: ["memory_read", "memory_write"],
      });
    });

    afterAll(async () => {
      await h?.close();
      await target.teardown();
    });

    it("a memory written in one session is read in the next, recorded as events, never in history", async () => {
      const first = (await h.sessions.createSession({ agentId })).session?.id as string;
      const wrote = await run(first, "remember blue");
      expect(wrote.status).toBe(TaskStatus.COMPLETED);
      expect(await replyOf(first)).toBe("saved ok");
      const writeEvent = (await eventsOf(wrote.id)).find((e) => e.kind === "agent.memory_write");
      expect(writeEvent?.payload?.kind.case).toBe("data");
      const written = writeEvent?.payload?.kind.value as { memory_id: string; owner_id: string };
      expect(written.owner_id).toBe(agentId);
      const { memory: stored } = await memory.getMemory({ memoryId: written.memory_id });
      expect(stored?.scope).toBe(MemoryScope.PERSONA);
      expect(toJson(ValueSchema, stored?.content as never)).toBe("blue");
      expect(stored?.provenance).toMatchObject({
        source: "run",
        task_id: wrote.id,
        session_id: first,
        agent_id: agentId,
      });

      const second = (await h.sessions.createSession({ agentId })).session?.id as string;
      const read = await run(second, "recall");
      expect(read.status).toBe(TaskStatus.COMPLETED);
      expect(await replyOf(second)).toBe('recalled: "blue"');
      const readEvent = (await eventsOf(read.id)).find((e) => e.kind === "agent.memory_read");
      expect(readEvent?.payload?.kind.value).toMatchObject({
        scope: "persona",
        owner_id: agentId,
        memories: [{ id: written.memory_id, content: "blue" }],
      });

      // A session's memory written over the API is no message of its transcript.
      const quiet = (await h.sessions.createSession({ agentId })).session?.id as string;
      await memory.createMemory({
        scope: MemoryScope.SESSION,
        ownerId: quiet,
        content: fromJson(ValueSchema, { note: "kept apart" }),
      });
      const { messages } = await h.sessions.listMessages({ sessionId: quiet, pageSize: 100 });
      expect(messages).toHaveLength(0);
      const listed = await memory.listMemories({ sessionId: quiet });
      expect(listed.memories.map((m) => toJson(ValueSchema, m.content as never))).toEqual([
        { note: "kept apart" },
      ]);

      // Replays: the value read at the time, unless refreshed memory is asked for.
      await memory.createMemory({
        scope: MemoryScope.PERSONA,
        ownerId: agentId,
        content: fromJson(ValueSchema, "green"),
      });
      const exact = await h.tasks.replayTask({ taskId: read.id });
      const exactDone = (
        await watchUntil(h, exact.task?.id as string, settled, { untilSettled: true })
      ).task;
      expect(exactDone.status).toBe(TaskStatus.COMPLETED);
      expect(await replyOf(exact.session?.id as string)).toBe('recalled: "blue"');
      // The tool result is what the source read, though the memory holds "green" now.
      expect(await replyOf(exact.session?.id as string, -2)).toContain('"content":"blue"');

      const fresh = await h.tasks.replayTask({ taskId: read.id, refreshMemory: true });
      const freshDone = (
        await watchUntil(h, fresh.task?.id as string, settled, { untilSettled: true })
      ).task;
      expect(freshDone.status).toBe(TaskStatus.COMPLETED);
      // The read sees the memory as it is now (the model's answer stays the recorded one).
      expect(await replyOf(fresh.session?.id as string, -2)).toContain('"content":"green"');
      // The refreshed read is recorded on the replay's own log.
      const refreshed = (await eventsOf(freshDone.id)).find((e) => e.kind === "agent.memory_read");
      expect(
        (refreshed?.payload?.kind.value as { memories?: { content: JsonValue }[] } | undefined)
          ?.memories?.[0],
      ).toMatchObject({ content: "green" });

      // A read the source never made (an override leads the model elsewhere): the
      // replay fails naming that memory read, and nothing is read live.
      const lost = await h.tasks.replayTask({
        taskId: read.id,
        mode: ReplayMode.WITH_OVERRIDES,
        overrides: {
          "llm:main:1": {
            value: fromJson(ValueSchema, {
              choices: [
                {
                  message: {
                    role: "assistant",
                    content: null,
                    tool_calls: [
                      {
                        id: "call_unrecorded_read",
                        type: "function",
                        function: { name: "memory_read", arguments: '{"scope":"persona"}' },
                      },
                    ],
                  },
                },
              ],
            }),
          },
        },
      });
      const lostDone = (
        await watchUntil(h, lost.task?.id as string, settled, { untilSettled: true })
      ).task;
      expect(lostDone.status).toBe(TaskStatus.FAILED);
      expect(lostDone.failure?.category).toBe("replay_dependency_unavailable");
      expect(lostDone.failure?.message).toContain("memory:call_unrecorded_read");
      expect((await eventsOf(lostDone.id)).some((e) => e.kind === "agent.memory_read")).toBe(false);
    });

    it("refuses an unknown scope and oversized content, storing nothing", async () => {
      const before = (await memory.listMemories({ pageSize: 100 })).memories.length;
      const bad = await callFailure(
        memory.createMemory({ scope: 9 as MemoryScope, content: fromJson(ValueSchema, "x") }),
      );
      expect(errorDetailOf(bad)?.reason).toBe("invalid_request");
      const missing = await callFailure(
        memory.createMemory({ content: fromJson(ValueSchema, "x") }),
      );
      expect(errorDetailOf(missing)?.reason).toBe("invalid_request");
      const big = await callFailure(
        memory.createMemory({
          scope: MemoryScope.WORKSPACE,
          content: fromJson(ValueSchema, "x".repeat(70 * 1024)),
        }),
      );
      expect(errorDetailOf(big)?.reason).toBe("payload_too_large");
      const noSession = await callFailure(
        memory.createMemory({
          scope: MemoryScope.SESSION,
          ownerId: "ses_nope",
          content: fromJson(ValueSchema, "x"),
        }),
      );
      expect(errorDetailOf(noSession)?.reason).toMatch(/not_found/);
      expect((await memory.listMemories({ pageSize: 100 })).memories).toHaveLength(before);
    });

    it("creates once per idempotency key, and keeps workspaces apart", async () => {
      const request = {
        scope: MemoryScope.WORKSPACE,
        content: fromJson(ValueSchema, { fact: "one" }),
        idempotencyKey: "mem-key-1",
      };
      const [a, b] = await Promise.all([
        memory.createMemory(request),
        memory.createMemory(request),
      ]);
      expect(a.memory?.id).toBe(b.memory?.id);
      expect([a.replayed, b.replayed].sort()).toEqual([false, true]);
      const reused = await callFailure(
        memory.createMemory({ ...request, content: fromJson(ValueSchema, { fact: "two" }) }),
      );
      expect(errorDetailOf(reused)?.reason).toBe("idempotency_key_reused");

      const other = memoryAs("ws_other");
      const hidden = await callFailure(other.getMemory({ memoryId: a.memory?.id as string }));
      expect(errorDetailOf(hidden)?.reason).toBe("resource_not_found");
      expect((await other.listMemories({})).memories).toHaveLength(0);
      const tenant = await callFailure(
        other.createMemory({ scope: MemoryScope.TENANT, content: fromJson(ValueSchema, "t") }),
      );
      expect(errorDetailOf(tenant)?.reason).toBe("permission_denied");

      await memory.deleteMemory({ memoryId: a.memory?.id as string });
      const gone = await callFailure(memory.getMemory({ memoryId: a.memory?.id as string }));
      expect((gone as { code?: Code }).code).toBe(Code.NotFound);
    });
  });
}
