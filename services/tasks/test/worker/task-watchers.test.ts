import { create } from "@bufbuild/protobuf";
import { TaskSchema } from "@trellis/contracts/tasks";
import { describe, expect, it } from "vitest";
import { TaskWatchers } from "../../src/worker/task-watchers.js";

describe("task watchers", () => {
  it("wake a watch with the committed snapshot, and remember a change made before waiting", async () => {
    const watchers = new TaskWatchers();
    const changes = watchers.watch("task_1");
    expect(watchers.watched("task_1")).toBe(true);
    watchers.notify("task_1", () => create(TaskSchema, { id: "task_1", status: 2 }));
    expect((await changes.next(1000))?.status).toBe(2);
    const pending = changes.next(1000);
    watchers.notify("task_1");
    expect(await pending).toBeUndefined();
    changes.close();
    expect(watchers.watched("task_1")).toBe(false);
  });

  it("time out without a change, and stop on abort", async () => {
    const watchers = new TaskWatchers();
    const changes = watchers.watch("task_1");
    const started = Date.now();
    expect(await changes.next(30)).toBeUndefined();
    expect(Date.now() - started).toBeGreaterThanOrEqual(25);
    const abort = new AbortController();
    const waiting = changes.next(10_000, abort.signal);
    abort.abort();
    expect(await waiting).toBeUndefined();
    changes.close();
  });
});
