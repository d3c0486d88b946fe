/**
 * Replay and fork, one suite for both hosts (embedded: PGlite and the
 * in-process log; distributed: PostgreSQL and JetStream).
 *
 * Sources are real runs: scripted agents (deterministic, re-run by the
 * replay) and built-in harness agents whose model is the recorded OpenAI
 * server of the adapters' harness tests. That server is stopped before any
 * harness task is replayed: a replay that tried to reach a provider would
 * fail, and the counters of the test tools show no tool ran again.
 */
import { fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { type Event, EventSchema, type Message, TaskStatus } from "@trellis/contracts/core";
import { ReplayMode, type Task, TaskSchema } from "@trellis/contracts/tasks";
import { createLocalExecutor, createScriptedAdapter } from "@trellis/execution";
import {
  createTools,
  enqueueChat,
  type RecordedServer,
  startRecordedHarness,
  weatherAgent,
  weatherTurn,
} from "@trellis/execution/testing";
import { errorDetailOf } from "@trellis/runtime";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { comparable } from "../src/testing/replayed-messages.js";
import { APPROVAL_GRAPH, createAgent, expectReason, text, watchUntil } from "./support/fixtures.js";
import type { TasksClients } from "./support/harness.js";

/** A running tasks service for the suite. */
export interface ReplayHost {
  clients: TasksClients;
  /** The same clients calling as an authenticated caller of `workspaceId`. */
  as(caller: { workspaceId: string; actorId: string }): TasksClients;
  /** Runs SQL against the service's own schema (distributed only). */
  sql?(text: string, values: unknown[]): Promise<{ rows: Record<string, unknown>[] }>;
  close(): Promise<void>;
}

/** Starts a host with this executor and these replay tools. */
export type StartHost = (options: {
  executor: ReturnType<typeof createLocalExecutor>;
  replayTools: ReturnType<typeof createTools>["tools"];
}) => Promise<ReplayHost>;

import {
  createDice,
  dataOf,
  decodeOutput,
  encodeOutput,
  markerOf,
  recordOf,
  settled,
  sha256,
  textOf,
} from "./support/replay-values.js";

export function describeReplay(name: string, startHost: StartHost): void {
  describe(`replay and fork (${name})`, () => {
    let host: ReplayHost;
    let c: TasksClients;
    let server: RecordedServer;
    const tools = createTools();
    const dice = createDice();
    let approvalAgent: string;

    beforeAll(async () => {
      process.env.TRELLIS_LOG_LEVEL ??= "error";
      const harness = await startRecordedHarness({ tools: tools.tools });
      server = harness.server;
      const executor = createLocalExecutor([
        createScriptedAdapter(),
        harness.adapter,
        dice.adapter,
      ]);
      host = await startHost({ executor, replayTools: tools.tools });
      c = host.clients;
      approvalAgent = await createAgent(c, "approver", "scripted", APPROVAL_GRAPH);
    });

    afterAll(async () => {
      await host?.close();
      await server?.close();
    });

    async function settle(
      taskId: string,
      clients = c,
    ): Promise<{ task: Task; seen: TaskStatus[] }> {
      return watchUntil(clients, taskId, settled, { untilSettled: true });
    }

    async function messagesOf(sessionId: string): Promise<Message[]> {
      const { messages } = await c.sessions.listMessages({ sessionId, pageSize: 1000 });
      return messages.map((m) => m.message as Message);
    }

    async function eventsOf(taskId: string, until: (events: Event[]) => boolean): Promise<Event[]> {
      return eventually(
        async () => {
          const { events } = await c.events.listEvents({ taskId, limit: 1000 });
          return until(events) ? events : undefined;
        },
        { what: `events of ${taskId}` },
      );
    }

    /**
     * Replays `taskId` overriding `key` with `value` under a declared sha256
     * that is not the value's: refused as an invalid request (returned).
     */
    async function refusedForItsHash(taskId: string, key: string, value: JsonValue) {
      return expectReason(
        c.tasks.replayTask({
          taskId,
          mode: ReplayMode.WITH_OVERRIDES,
          overrides: {
            [key]: { value: fromJson(ValueSchema, value), sha256: `sha256:${"0".repeat(64)}` },
          },
        }),
        "invalid_request",
      );
    }

    /** Submits a turn to an approval agent and approves it; returns the settled task. */
    async function approvedTurn(sessionId: string, input: string, note: string) {
      const { task } = await c.tasks.submitTask({ sessionId, input: text(input) });
      const waiting = (await settle(task?.id as string)).task;
      expect(waiting.status).toBe(TaskStatus.INPUT_REQUIRED);
      await c.signals.deliver({
        signalId: waiting.suspension?.signalId as string,
        payload: fromJson(ValueSchema, { approved: true, note }),
      });
      const done = (await settle(waiting.id)).task;
      expect(done.status).toBe(TaskStatus.COMPLETED);
      return { waiting, done };
    }

    describe("scripted agents", () => {
      let sessionId: string;
      let source: Task;
      let checkpointId: string;

      beforeAll(async () => {
        const { session } = await c.sessions.createSession({ agentId: approvalAgent });
        sessionId = session?.id as string;
        await approvedTurn(sessionId, "first", "one");
        const second = await approvedTurn(sessionId, "second", "two");
        source = second.done;
        checkpointId = second.waiting.suspension?.checkpointId as string;
      });

      it("replays exactly: the recorded signal resumes it, the transcript is the source's", async () => {
        const { task, session, replayed } = await c.tasks.replayTask({ taskId: source.id });
        expect(replayed).toBe(false);
        expect(task?.parentTaskId).toBe(source.id);
        expect(task?.sessionId).toBe(session?.id);
        // Lineage: a fork of the source's session just before the source's input.
        expect(session).toMatchObject({
          parentSessionId: sessionId,
          rootSessionId: sessionId,
          forkedMessageCount: 3n,
        });
        const { task: done, seen } = await settle(task?.id as string);
        expect(done.status).toBe(TaskStatus.COMPLETED);
        // It never waited: the source's approval was replayed, not asked for again.
        expect(seen).not.toContain(TaskStatus.INPUT_REQUIRED);

        const original = await messagesOf(sessionId);
        const replay = await messagesOf(session?.id as string);
        expect(replay).toHaveLength(original.length);
        // Shared history: the same messages, ids included.
        expect(replay.slice(0, 3).map((m) => m.id)).toEqual(original.slice(0, 3).map((m) => m.id));
        // The replayed input and output reproduce the source's.
        expect(replay.slice(3).map(comparable)).toEqual(original.slice(3).map(comparable));
        expect(textOf(replay.at(-1))).toBe(textOf(original.at(-1)));

        // Every replayed message is marked, pointing at the event it re-creates.
        const sourceEvents = await eventsOf(source.id, (e) =>
          e.some((x) => x.kind === "task.completed"),
        );
        const eventOfMessage = new Map(
          sourceEvents.flatMap((e) =>
            e.payload?.kind.case === "messageAppended"
              ? [[e.payload.kind.value.message?.id as string, e] as const]
              : [],
          ),
        );
        for (const [i, message] of replay.slice(3).entries()) {
          const counterpart = original[3 + i] as Message;
          const event = eventOfMessage.get(counterpart.id) as Event;
          expect(markerOf(message)).toMatchObject({
            source_task_id: source.id,
            replay_task_id: done.id,
            original_message_id: counterpart.id,
            original_event_id: event.id,
            replay_cursor: `${source.id}:${event.sequence}`,
            mode: "exact",
            override_key: null,
          });
        }
        // The replay's own stream says what happened, before the task ends.
        const events = await eventsOf(done.id, (e) => e.some((x) => x.kind === "task.completed"));
        const kinds = events.map((e) => e.kind);
        expect(kinds.indexOf("replay.started")).toBeGreaterThan(-1);
        expect(kinds.indexOf("replay.completed")).toBeLessThan(kinds.indexOf("task.completed"));
        expect(dataOf(events.find((e) => e.kind === "replay.completed"))).toMatchObject({
          source_task_id: source.id,
          mode: "exact",
          deltas: [],
        });
        // Replayed message events carry the marker too.
        const replayedEvent = events.find((e) => e.kind === "agent.message");
        expect(
          replayedEvent?.payload?.kind.case === "messageAppended" &&
            replayedEvent.payload.kind.value.message?.metadata?.replay,
        ).toMatchObject({ source_task_id: source.id, replay_task_id: done.id });
      });

      it("replays from a checkpoint: the history up to the suspension, then what followed", async () => {
        const sourceEvents = await eventsOf(source.id, (e) =>
          e.some((x) => x.kind === "task.completed"),
        );
        const boundary = sourceEvents.find((e) => e.kind === "task.input_required") as Event;
        expect(checkpointId).toMatch(/^chk_/);
        const original = await messagesOf(sessionId);
        for (const request of [{ checkpointEventId: boundary.id }, { checkpointId }]) {
          const { task, session } = await c.tasks.replayTask({
            taskId: source.id,
            mode: ReplayMode.FROM_CHECKPOINT,
            ...request,
          });
          expect(session).toMatchObject({ forkedFromEventId: boundary.id, forkedMessageCount: 5n });
          const done = (await settle(task?.id as string)).task;
          expect(done.status).toBe(TaskStatus.COMPLETED);
          // Only what came after the checkpoint was produced by the replay.
          expect(done.output.map(comparable)).toEqual([comparable(original[5])]);
          const replay = await messagesOf(session?.id as string);
          expect(replay.slice(0, 5).map((m) => m.id)).toEqual(
            original.slice(0, 5).map((m) => m.id),
          );
          expect(replay.map(comparable)).toEqual(original.map(comparable));
          expect(markerOf(replay[5])).toMatchObject({
            mode: "from_checkpoint",
            original_message_id: original[5]?.id,
          });
        }
      });

      it("replays from a checkpoint resumed without payload: it goes on after the suspend node", async () => {
        const agent = await createAgent(c, "go-waiter", "scripted", {
          entry: "ask",
          nodes: {
            ask: { update: { messages: [{ role: "assistant", content: "asked" }] } },
            wait: { suspend: { signal_id: "go" } },
            after: { update: { messages: [{ role: "assistant", content: "after" }] } },
          },
          edges: [
            { from: "ask", to: "wait" },
            { from: "wait", to: "after" },
          ],
        });
        const { session } = await c.sessions.createSession({ agentId: agent });
        const { task } = await c.tasks.submitTask({
          sessionId: session?.id as string,
          input: text("hi"),
        });
        const waiting = (await settle(task?.id as string)).task;
        expect(waiting.status).toBe(TaskStatus.INPUT_REQUIRED);
        await c.signals.deliver({ signalId: waiting.suspension?.signalId as string });
        const source = (await settle(waiting.id)).task;
        expect(source.output.map(textOf)).toEqual(["asked", "after"]);
        const replay = await c.tasks.replayTask({
          taskId: source.id,
          mode: ReplayMode.FROM_CHECKPOINT,
          checkpointId: waiting.suspension?.checkpointId as string,
        });
        const done = (await settle(replay.task?.id as string)).task;
        expect(done.status).toBe(TaskStatus.COMPLETED);
        expect(done.output.map(textOf)).toEqual(["after"]);
      });

      it("names what is missing when a checkpoint cannot be restored", async () => {
        const error = await expectReason(
          c.tasks.replayTask({
            taskId: source.id,
            mode: ReplayMode.FROM_CHECKPOINT,
            checkpointId: "chk_nope",
          }),
          "cursor_expired",
        );
        expect(error.code).toBe(Code.OutOfRange);
        expect(errorDetailOf(error)?.metadata).toMatchObject({
          source_task_id: source.id,
          missing: "checkpoint:chk_nope",
        });
        const events = await eventsOf(source.id, (e) => e.some((x) => x.kind === "task.completed"));
        const completed = events.find((e) => e.kind === "task.completed") as Event;
        const notABoundary = await expectReason(
          c.tasks.replayTask({
            taskId: source.id,
            mode: ReplayMode.FROM_CHECKPOINT,
            checkpointEventId: completed.id,
          }),
          "invalid_request",
        );
        expect(errorDetailOf(notABoundary)?.param).toBe("checkpoint_event_id");
        await expectReason(
          c.tasks.replayTask({ taskId: source.id, mode: ReplayMode.FROM_CHECKPOINT }),
          "invalid_request",
        );
      });

      it("refuses overrides a scripted agent has no dependency for, and overrides in exact mode", async () => {
        const llm = fromJson(ValueSchema, { choices: [{ message: { content: "x" } }] });
        // Replays the source overriding `key` with `value` (WITH_OVERRIDES): refused as
        // an invalid request; the param the refusal names.
        const refusedParam = async (key: string, value: typeof llm) => {
          const refused = await expectReason(
            c.tasks.replayTask({
              taskId: source.id,
              mode: ReplayMode.WITH_OVERRIDES,
              overrides: { [key]: { value } },
            }),
            "invalid_request",
          );
          return errorDetailOf(refused)?.param;
        };
        expect(await refusedParam("llm:main:1", llm)).toBe("overrides.llm:main:1");
        await expectReason(
          c.tasks.replayTask({ taskId: source.id, overrides: { "time:now": { value: llm } } }),
          "invalid_request",
        );
        expect(await refusedParam("clock-now", llm)).toBe("overrides.clock-now");
        // A clock reading is an RFC 3339 date-time; a secret is a string.
        for (const [key, value] of [
          ["time:now", "yesterday"],
          ["time:now", "2026-13-45T99:00:00Z"],
          ["secret:api_key", { token: "x" }],
        ] as const) {
          expect(await refusedParam(key, fromJson(ValueSchema, value))).toBe(
            `overrides.${key}.value`,
          );
        }
        await expectReason(c.tasks.replayTask({ taskId: "task_missing" }), "resource_not_found");
      });

      it("keeps secret override values and their plain hashes out of the task and its events, and reports unused overrides", async () => {
        const secret = "sk-live-DO-NOT-LEAK-4711";
        // A declared sha256 of a secret is checked, but a mismatch does not echo the value's hash.
        const wrong = await refusedForItsHash(source.id, "secret:api_key", secret);
        expect(errorDetailOf(wrong)?.param).toBe("overrides.secret:api_key.sha256");
        expect(wrong.rawMessage).not.toContain(sha256(secret));
        // The caller knows its own value: the right plain hash is accepted (and not kept).
        const { task } = await c.tasks.replayTask({
          taskId: source.id,
          mode: ReplayMode.WITH_OVERRIDES,
          overrides: {
            "secret:api_key": { value: fromJson(ValueSchema, secret), sha256: sha256(secret) },
          },
        });
        const done = (await settle(task?.id as string)).task;
        expect(done.status).toBe(TaskStatus.COMPLETED);
        expect(done.metadata?.replay).toMatchObject({
          source_task_id: source.id,
          mode: "with_overrides",
          override_keys: ["secret:api_key"],
        });
        expect(JSON.stringify(toJson(TaskSchema, done))).not.toContain(secret);
        const events = await eventsOf(done.id, (e) => e.some((x) => x.kind === "task.completed"));
        const plain = sha256(secret).slice("sha256:".length);
        for (const event of events) {
          const json = JSON.stringify(toJson(EventSchema, event));
          expect(json).not.toContain(secret);
          expect(json).not.toContain(plain);
        }
        expect(JSON.stringify(toJson(TaskSchema, done))).not.toContain(plain);
        // At rest too: the replay's stored overrides and plan hold the value sealed.
        if (host.sql) {
          const { rows } = await host.sql(
            "select overrides::text as overrides, plan::text as plan from replays where task_id = $1",
            [done.id],
          );
          expect(rows).toHaveLength(1);
          const stored = JSON.stringify(rows[0]);
          expect(stored).not.toContain(secret);
          expect(stored).not.toContain(plain);
          expect(stored).toMatch(/enc:v1:/);
        }
        // The override is named by the deployment's keyed fingerprint, never a plain hash.
        expect(dataOf(events.find((e) => e.kind === "replay.started"))).toMatchObject({
          overrides: [
            {
              override_key: "secret:api_key",
              kind: "secret_value",
              sha256: null,
              fingerprint: expect.stringMatching(/^hmac-sha256:[0-9a-f]{64}$/),
              visibility: "receipt_only",
            },
          ],
        });
        // Nothing in a scripted run reads a secret: the override was never applied.
        expect(dataOf(events.find((e) => e.kind === "replay.completed"))).toMatchObject({
          deltas: [],
          unused_override_keys: ["secret:api_key"],
        });
      });

      it("forks at a message id and at a stream cursor, with the lineage on the session", async () => {
        const original = await messagesOf(sessionId);
        const at = original[1] as Message;
        const { session } = await c.sessions.forkSession({ sessionId, atMessageId: at.id });
        expect(session).toMatchObject({
          parentSessionId: sessionId,
          rootSessionId: sessionId,
          forkedFromMessageId: at.id,
          forkedMessageCount: 2n,
          messageCount: 2n,
        });
        expect((await messagesOf(session?.id as string)).map((m) => m.id)).toEqual(
          original.slice(0, 2).map((m) => m.id),
        );
        const { session: again } = await c.sessions.getSession({
          sessionId: session?.id as string,
        });
        expect(again?.forkedFromMessageId).toBe(at.id);

        // A cursor from an event stream is an event id: the history as of that event.
        const events = await eventsOf(source.id, (e) => e.some((x) => x.kind === "task.completed"));
        const boundary = events.find((e) => e.kind === "task.input_required") as Event;
        const { session: byCursor } = await c.sessions.forkSession({
          sessionId,
          atCursor: boundary.id,
        });
        expect(byCursor).toMatchObject({ forkedFromEventId: boundary.id, messageCount: 5n });
        const { session: atOrigin } = await c.sessions.forkSession({
          sessionId,
          atCursor: "origin",
        });
        expect(atOrigin).toMatchObject({ messageCount: 0n, forkedMessageCount: 0n });

        const unknown = await expectReason(
          c.sessions.forkSession({ sessionId, atMessageId: "msg_not_here" }),
          "invalid_request",
        );
        expect(errorDetailOf(unknown)?.param).toBe("at_message_id");
      });

      it("hides sources of other workspaces: fork and replay are 404", async () => {
        const outsider = host.as({ workspaceId: "w_outsider", actorId: "mallory" });
        // One call at a time: a second call made up front could be refused
        // while the first is awaited, an unhandled rejection until then.
        for (const call of [
          () => outsider.tasks.replayTask({ taskId: source.id }),
          () => outsider.sessions.forkSession({ sessionId }),
        ]) {
          const error = await expectReason(call(), "resource_not_found");
          expect(error.code).toBe(Code.NotFound);
        }
        // A caller of the source's own workspace may replay it.
        const insider = host.as({ workspaceId: "default", actorId: "alice" });
        const { task } = await insider.tasks.replayTask({
          taskId: source.id,
          idempotencyKey: "k1",
        });
        const retried = await insider.tasks.replayTask({ taskId: source.id, idempotencyKey: "k1" });
        expect(retried.replayed).toBe(true);
        expect(retried.task?.id).toBe(task?.id);
        expect((await settle(task?.id as string, insider)).task.status).toBe(TaskStatus.COMPLETED);
      });
    });

    describe("built-in harness agents (recorded model, server stopped before replaying)", () => {
      let weather: { task: Task; sessionId: string };
      let damaged: Task;
      let mail: { task: Task; sessionId: string };
      let requestsBefore: number;

      async function harnessTurn(agentId: string, input: string) {
        const { task } = await c.tasks.submitTask({
          sessionId: "",
          createSession: true,
          agentId,
          input: text(input),
        });
        return {
          task: (await settle(task?.id as string)).task,
          sessionId: task?.sessionId as string,
        };
      }

      beforeAll(async () => {
        const weatherId = await createAgent(
          c,
          "weather",
          "harness",
          weatherAgent({ stream: true }),
        );
        for (let i = 0; i < 2; i++) enqueueChat(server, ...weatherTurn({ stream: true }));
        weather = await harnessTurn(weatherId, "What's the weather in Paris?");
        damaged = (await harnessTurn(weatherId, "What's the weather in Paris?")).task;
        const mailer = await createAgent(c, "mailer", "harness", {
          provider: "openai",
          model: "gpt-4o-mini",
          tools: ["send_email"],
          stream: false,
        });
        enqueueChat(server, "openai/chat-email-tool-call.http");
        const { task } = await c.tasks.submitTask({
          createSession: true,
          agentId: mailer,
          input: text("Email Bob about lunch"),
        });
        const waiting = (await settle(task?.id as string)).task;
        enqueueChat(server, "openai/chat-email-sent.http");
        await c.signals.deliver({
          signalId: waiting.suspension?.signalId as string,
          payload: fromJson(ValueSchema, { approved: true }),
        });
        mail = { task: (await settle(waiting.id)).task, sessionId: waiting.sessionId };
        for (const t of [weather.task, damaged, mail.task])
          expect(t.status).toBe(TaskStatus.COMPLETED);
        expect(server.pending()).toEqual({});
        expect(tools.runs.get_weather).toHaveLength(2);
        expect(tools.runs.send_email).toHaveLength(1);
        requestsBefore = server.requests.length;
        // From here on no provider answers: replays must not need one.
        await server.close();
      });

      afterAll(() => {
        expect(server.requests.length).toBe(requestsBefore);
      });

      it("replays a tool-loop turn exactly, without the provider or the tool", async () => {
        const { task, session } = await c.tasks.replayTask({ taskId: weather.task.id });
        const done = (await settle(task?.id as string)).task;
        expect(done.status, done.failure?.message).toBe(TaskStatus.COMPLETED);
        const original = await messagesOf(weather.sessionId);
        const replay = await messagesOf(session?.id as string);
        // Same transcript, model records and tool records included.
        expect(replay.map(comparable)).toEqual(original.map(comparable));
        expect(replay[1]?.metadata?.["llm:main:1"]).toEqual(original[1]?.metadata?.["llm:main:1"]);
        expect(replay[2]?.metadata?.["tool:call_Q9sT4mV2aB7cD8eF9gH0iJ1k"]).toMatchObject({
          status: "ok",
        });
        expect(markerOf(replay[3])).toMatchObject({
          source_task_id: weather.task.id,
          original_message_id: original[3]?.id,
          override_key: null,
        });
        expect(tools.runs.get_weather).toHaveLength(2);
      });

      it("replays an approval-gated call with the recorded approval: the email is not sent again", async () => {
        const { task, session } = await c.tasks.replayTask({ taskId: mail.task.id });
        const { task: done, seen } = await settle(task?.id as string);
        expect(done.status, done.failure?.message).toBe(TaskStatus.COMPLETED);
        expect(seen).not.toContain(TaskStatus.INPUT_REQUIRED);
        const original = await messagesOf(mail.sessionId);
        expect((await messagesOf(session?.id as string)).map(comparable)).toEqual(
          original.map(comparable),
        );
        expect(tools.runs.send_email).toHaveLength(1);
      });

      it("substitutes an llm: override and records the delta with before/after hashes", async () => {
        const value = {
          id: "chatcmpl_override_1",
          object: "chat.completion",
          model: "gpt-4o-mini-2024-07-18",
          choices: [
            {
              index: 0,
              message: { role: "assistant", content: "Overridden: it is raining in Paris." },
              finish_reason: "stop",
            },
          ],
        };
        const wrongHash = await refusedForItsHash(weather.task.id, "llm:main:2", value);
        expect(errorDetailOf(wrongHash)?.param).toBe("overrides.llm:main:2.sha256");

        const { task, session } = await c.tasks.replayTask({
          taskId: weather.task.id,
          mode: ReplayMode.WITH_OVERRIDES,
          reason: "what if it rained",
          overrides: {
            "llm:main:2": {
              kind: "llm_provider_response",
              value: fromJson(ValueSchema, value),
              sha256: sha256(value),
            },
          },
        });
        const done = (await settle(task?.id as string)).task;
        expect(done.status, done.failure?.message).toBe(TaskStatus.COMPLETED);
        const original = await messagesOf(weather.sessionId);
        const replay = await messagesOf(session?.id as string);
        // Everything up to the substituted call is the source's; the answer is the override's.
        expect(replay.slice(0, 3).map(comparable)).toEqual(original.slice(0, 3).map(comparable));
        expect(textOf(replay[3])).toBe("Overridden: it is raining in Paris.");
        expect(recordOf(replay[3], "llm:main:2").response).toEqual(value);
        const before = sha256(recordOf(original[3], "llm:main:2").response as JsonValue);
        expect(markerOf(replay[3])).toMatchObject({
          mode: "with_overrides",
          override_key: "llm:main:2",
          original_message_id: original[3]?.id,
          receipt_delta_id: `${done.id}:llm:main:2`,
          override: {
            kind: "llm_provider_response",
            material: "metadata.llm:main:2.response",
            before_sha256: before,
            after_sha256: sha256(value),
            visibility: "receipt_only",
            reason: "what if it rained",
          },
        });
        expect(before).not.toBe(sha256(value));
        for (const message of replay.slice(1, 3)) expect(markerOf(message).override_key).toBeNull();
        // The receipt delta, where a receipt builder reads it: replay.completed, before task.completed.
        const events = await eventsOf(done.id, (e) => e.some((x) => x.kind === "task.completed"));
        expect(dataOf(events.find((e) => e.kind === "replay.completed"))).toMatchObject({
          deltas: [
            {
              override_key: "llm:main:2",
              before_sha256: before,
              after_sha256: sha256(value),
              reason: "what if it rained",
            },
          ],
          unused_override_keys: [],
        });
      });

      it("fails naming the first unrecorded dependency when an override leaves the recorded path", async () => {
        const value = {
          choices: [
            {
              message: {
                role: "assistant",
                content: null,
                tool_calls: [
                  {
                    id: "call_unrecorded",
                    type: "function",
                    function: { name: "get_weather", arguments: '{"city":"Oslo"}' },
                  },
                ],
              },
            },
          ],
        };
        const { task, session } = await c.tasks.replayTask({
          taskId: weather.task.id,
          mode: ReplayMode.WITH_OVERRIDES,
          overrides: { "llm:main:1": { value: fromJson(ValueSchema, value) } },
        });
        const done = (await settle(task?.id as string)).task;
        expect(done.status).toBe(TaskStatus.FAILED);
        expect(done.failure?.category).toBe("replay_dependency_unavailable");
        expect(done.failure?.message).toContain("tool:call_unrecorded");
        // The tool never ran; no made-up result stands in for it.
        expect(tools.runs.get_weather).toHaveLength(2);
        const replay = await messagesOf(session?.id as string);
        const results = replay.filter((m) => m.toolCallId === "call_unrecorded");
        for (const result of results) expect(result.metadata?.synthetic).toBe(true);
        const events = await eventsOf(done.id, (e) => e.some((x) => x.kind === "task.failed"));
        expect(dataOf(events.find((e) => e.kind === "replay.failed"))).toMatchObject({
          status: "FAILED",
          failure: { category: "replay_dependency_unavailable" },
        });
      });

      it.skipIf(name === "embedded")(
        "refuses to replay a task whose recording lost a model response, naming it",
        async () => {
          if (!host.sql) throw new Error("this host gives no SQL access");
          const { rows } = await host.sql("select output from tasks where id = $1", [damaged.id]);
          const output = decodeOutput(rows[0]?.output as Uint8Array);
          // The final answer's record is gone (as if compacted away).
          const last = output[2] as Message;
          const metadata = { ...(last.metadata ?? {}) };
          delete metadata["llm:main:2"];
          last.metadata = metadata;
          await host.sql("update tasks set output = $1 where id = $2", [
            encodeOutput(output),
            damaged.id,
          ]);
          const error = await expectReason(
            c.tasks.replayTask({ taskId: damaged.id }),
            "cursor_expired",
          );
          expect(error.code).toBe(Code.OutOfRange);
          expect(error.message).toContain("llm:main:2");
          expect(errorDetailOf(error)?.metadata).toMatchObject({
            source_task_id: damaged.id,
            missing: "llm:main:2",
            message_id: last.id,
          });
        },
      );
    });

    describe("other backends", () => {
      it("serves the recorded output of a backend it cannot re-run, instead of running it again", async () => {
        const agentId = await createAgent(c, "dice", "dice", {});
        const { task } = await c.tasks.submitTask({
          createSession: true,
          agentId,
          input: text("roll"),
        });
        const source = (await settle(task?.id as string)).task;
        expect(source.status).toBe(TaskStatus.COMPLETED);
        expect(dice.rolls).toHaveLength(1);
        const replayed = await c.tasks.replayTask({ taskId: source.id });
        const done = (await settle(replayed.task?.id as string)).task;
        expect(done.status).toBe(TaskStatus.COMPLETED);
        expect(done.output.map(comparable)).toEqual(source.output.map(comparable));
        expect(textOf(done.output[0])).toBe(`rolled ${dice.rolls[0]}`);
        expect(dice.rolls).toHaveLength(1);
        expect(markerOf(done.output[0])).toMatchObject({
          original_message_id: source.output[0]?.id,
          mode: "exact",
        });
        const events = await eventsOf(done.id, (e) => e.some((x) => x.kind === "task.completed"));
        expect(dataOf(events.find((e) => e.kind === "replay.started"))).toMatchObject({
          strategy: "recorded",
        });
      });
    });
  });
}
