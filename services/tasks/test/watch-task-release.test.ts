// WatchTask must stop watching a task as soon as it hands out the answer that
// ends the stream: a client that goes away after it (chat's Send does) may
// leave the handler suspended at that yield for good, and a watch left
// registered keeps every later commit's snapshot of the task in memory.
// SubmitTask's wait (wait_ms) follows the task the same way and must let go
// whichever way the wait ends.
import { create } from "@bufbuild/protobuf";
import { Role, TaskStatus } from "@trellis/contracts/core";
import {
  SubmitTaskRequestSchema,
  type Task,
  TaskSchema,
  TaskService,
} from "@trellis/contracts/tasks";
import { directCallContext } from "@trellis/testkit";
import { describe, expect, it } from "vitest";
import type { HandlerDeps } from "../src/handlers/common.js";
import { createTaskHandlers } from "../src/handlers/task-handlers.js";
import { TaskWatchers } from "../src/worker/task-watchers.js";

function harness(initial: TaskStatus) {
  const watchers = new TaskWatchers();
  let stored = create(TaskSchema, { id: "task_w", sessionId: "ses_w", status: initial });
  const deps = {
    watchers,
    store: { getTask: async () => stored },
    runner: { isRunning: () => true },
    watchThroughLog: false,
  } as unknown as HandlerDeps;
  const handlers = createTaskHandlers(deps);
  const abort = new AbortController();
  const context = directCallContext(TaskService.method.watchTask, abort.signal);
  const stream = handlers.watchTask?.(
    { taskId: "task_w", untilSettled: true } as never,
    context,
  ) as AsyncGenerator<{ task?: Task }>;
  return {
    watchers,
    stream,
    abort,
    settle(status: TaskStatus) {
      stored = create(TaskSchema, { ...stored, status });
      watchers.notify("task_w", () => stored);
    },
  };
}

describe("WatchTask releases its watch", () => {
  it("when the first answer already ends the stream, before handing it out", async () => {
    const h = harness(TaskStatus.COMPLETED);
    const first = await h.stream.next();
    expect(first.value?.task?.status).toBe(TaskStatus.COMPLETED);
    // The client never asks for more: nothing may still watch the task.
    expect(h.watchers.watched("task_w")).toBe(false);
  });

  it("when a later change ends it, before handing that out", async () => {
    const h = harness(TaskStatus.WORKING);
    expect((await h.stream.next()).value?.task?.status).toBe(TaskStatus.WORKING);
    expect(h.watchers.watched("task_w")).toBe(true);
    const next = h.stream.next();
    h.settle(TaskStatus.INPUT_REQUIRED);
    expect((await next).value?.task?.status).toBe(TaskStatus.INPUT_REQUIRED);
    expect(h.watchers.watched("task_w")).toBe(false);
  });

  it("when the client goes away while the handler waits", async () => {
    const h = harness(TaskStatus.WORKING);
    await h.stream.next();
    h.abort.abort(new Error("client gone"));
    expect(h.watchers.watched("task_w")).toBe(false);
  });
});

function submitHarness() {
  const watchers = new TaskWatchers();
  let stored = create(TaskSchema, { id: "task_s", sessionId: "ses_s", status: TaskStatus.WORKING });
  const dispatched: unknown[] = [];
  const deps = {
    watchers,
    store: {
      getTask: async () => stored,
      submitTask: async () => ({ task: stored, replayed: false, claim: { taskId: "task_s" } }),
    },
    runner: { isRunning: () => true, dispatch: (claim: unknown) => dispatched.push(claim) },
    watchThroughLog: false,
  } as unknown as HandlerDeps;
  const handlers = createTaskHandlers(deps);
  const abort = new AbortController();
  const submit = (waitMs: number) =>
    handlers.submitTask?.(
      create(SubmitTaskRequestSchema, {
        sessionId: "ses_s",
        input: { role: Role.USER, parts: [{ kind: { case: "text", value: { text: "hi" } } }] },
        waitMs,
      }),
      directCallContext(TaskService.method.submitTask, abort.signal),
    ) as Promise<{ task?: Task }>;
  return {
    watchers,
    abort,
    dispatched,
    submit,
    settle(status: TaskStatus) {
      stored = create(TaskSchema, { ...stored, status });
      watchers.notify("task_s", () => stored);
    },
  };
}

describe("SubmitTask's wait releases its watch", () => {
  it("when the task settles: answered with the settled task", async () => {
    const h = submitHarness();
    const answer = h.submit(10_000);
    await new Promise((resolve) => setImmediate(resolve));
    expect(h.dispatched).toHaveLength(1);
    expect(h.watchers.watched("task_s")).toBe(true);
    h.settle(TaskStatus.COMPLETED);
    expect((await answer).task?.status).toBe(TaskStatus.COMPLETED);
    expect(h.watchers.watched("task_s")).toBe(false);
  });

  it("when the wait runs out: answered with the task as it stands", async () => {
    const h = submitHarness();
    expect((await h.submit(20)).task?.status).toBe(TaskStatus.WORKING);
    expect(h.watchers.watched("task_s")).toBe(false);
  });

  it("when the client goes away while it waits", async () => {
    const h = submitHarness();
    const answer = h.submit(10_000);
    await new Promise((resolve) => setImmediate(resolve));
    h.abort.abort(new Error("client gone"));
    expect((await answer).task?.status).toBe(TaskStatus.WORKING);
    expect(h.watchers.watched("task_s")).toBe(false);
  });
});
