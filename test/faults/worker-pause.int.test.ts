// Fault suite (issue 9): an adapter worker paused (SIGSTOP) mid-execution for
// longer than its heartbeat lets it live, then resumed (SIGCONT). The router
// must take the work away from it — run again on another worker when the agent
// is safe to retry, else fail it cleanly with `worker_lost` — and the paused
// worker's late result must be fenced off: the task keeps its one outcome and
// its transcript gets no second reply. Distributed mode, loopback only.
import { TaskStatus } from "@trellis/contracts/core";
import { eventually, uniqueName } from "@trellis/testkit";
import { testGround } from "@trellis/testkit/ground";
import { startWorkerProcess, type WorkerProcess } from "@trellis/testkit/worker-process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Mesh } from "../../src/mesh.js";
import { type Clients, retrying, startFaultMesh, textOf } from "./support.js";

const workerScript = new URL("../tracing/traced-worker.ts", import.meta.url).pathname;
const heartbeatMs = 200; // the router drops a worker after 3 missed beats
const workMs = 2500; // how long the probe works on the paused turn
const pauseMs = 2000; // well past 3 heartbeats

describe("a paused adapter worker", () => {
  let mesh: Mesh;
  let clients: Clients;
  const ground = testGround("fault_pause");
  const workers: WorkerProcess[] = [];

  const startWorker = async (backend: string) => {
    const worker = await startWorkerProcess(workerScript, {
      NATS_URL: ground.natsUrl,
      TRELLIS_NATS_PREFIX: ground.prefix,
      TRELLIS_WORKER_HEARTBEAT: `${heartbeatMs}ms`,
      PROBE_BACKEND: backend,
    });
    workers.push(worker);
    return worker;
  };

  beforeAll(async () => {
    ({ mesh, clients } = await startFaultMesh(await ground.prepare()));
  }, 120_000);

  afterAll(async () => {
    for (const w of workers) {
      w.child.kill("SIGCONT");
      await w.kill();
    }
    await mesh?.stop();
    await ground.remove();
  });

  /** Submit `sleep <workMs>` to an agent on `backend`; resolves once `worker` runs it. */
  async function submitTo(
    backend: string,
    safeToRetry: boolean,
    candidates: WorkerProcess | WorkerProcess[],
  ) {
    const pool = Array.isArray(candidates) ? candidates : [candidates];
    // The backend is known once the worker's registration reached the
    // mesh; under load that can be after the worker process is up.
    const name = uniqueName("paused");
    const { agent } = await eventually(
      () =>
        clients.agents.createAgent({
          agent: { workspaceId: "default", name, backend, safeToRetry, definition: {} },
        }),
      { timeoutMs: 15_000, intervalMs: 200, what: `an agent on backend ${backend}` },
    );
    const sessionId = `ses_${uniqueName("p")}`;
    const input = `sleep ${workMs}`;
    // The router learns of a new worker from its heartbeats: retry until routed.
    const task = await eventually(
      async () => {
        const { task } = await retrying(() =>
          clients.tasks.submitTask({
            sessionId,
            createSession: true,
            workspaceId: "default",
            agentId: agent?.id ?? "",
            idempotencyKey: `${sessionId}-submit`,
            input: { role: 1, parts: [{ kind: { case: "text", value: { text: input } } }] },
          }),
        );
        return task;
      },
      { timeoutMs: 15_000, what: "the task submitted" },
    );
    await eventually(() => pool.some((w) => w.ran().includes(task.id)), {
      timeoutMs: 15_000,
      what: `a worker running ${task.id}`,
    });
    return { taskId: task.id, sessionId, input };
  }

  /**
   * Wait until the resumed worker returned from the superseded run (completed,
   * or cancelled if the router's cancel notice reached it) and had time to
   * report it to the router.
   */
  const lateResult = async (worker: WorkerProcess, taskId: string) => {
    await eventually(() => worker.output().includes(`finished ${taskId} `), {
      timeoutMs: workMs + 10_000,
      what: "the resumed worker to finish its stale run",
    });
    await new Promise((r) => setTimeout(r, 1000));
    const status = new RegExp(`finished ${taskId} (\\w+)`).exec(worker.output())?.[1];
    console.log(`[faults] the paused worker's stale run of ${taskId} ended ${status}`);
  };

  const settled = (taskId: string) =>
    eventually(
      async () => {
        const { task } = await clients.tasks.getTask({ taskId });
        return task && task.status >= TaskStatus.COMPLETED ? task : undefined;
      },
      { timeoutMs: 30_000, what: `task ${taskId} ended` },
    );

  const transcript = async (sessionId: string) =>
    (await clients.sessions.listMessages({ sessionId, pageSize: 100 })).messages.map((m) =>
      textOf(m.message),
    );

  it("hands a safe-to-retry turn to another worker and fences off the late result", async () => {
    const started = Date.now();
    const backend = "pause-retry";
    // Two workers of the backend, both known to the router before the turn:
    // whichever claims it is paused, the other must take it over.
    const pair = [await startWorker(backend), await startWorker(backend)];
    const { taskId, sessionId, input } = await submitTo(backend, true, pair);
    const paused = pair.find((w) => w.ran().includes(taskId)) as WorkerProcess;
    const takeover = pair.find((w) => w !== paused) as WorkerProcess;
    paused.child.kill("SIGSTOP");
    await new Promise((r) => setTimeout(r, pauseMs));

    // The router gave the turn to the live worker, which completed it.
    const task = await settled(taskId);
    expect(task.status, JSON.stringify(task.failure)).toBe(TaskStatus.COMPLETED);
    expect(takeover.ran()).toContain(taskId);
    const reply = `${backend} says: ${input}`;
    expect(await transcript(sessionId)).toEqual([input, reply]);

    // Resume the stale worker: it finishes its sleep and reports; that result
    // belongs to a superseded attempt and must change nothing.
    paused.child.kill("SIGCONT");
    await lateResult(paused, taskId);
    const after = await clients.tasks.getTask({ taskId });
    expect(after.task?.status).toBe(TaskStatus.COMPLETED);
    expect(after.task?.output.map(textOf)).toEqual([reply]);
    expect(await transcript(sessionId)).toEqual([input, reply]);
    const { tasks } = await clients.tasks.listTasks({ sessionId, workspaceId: "default" });
    expect(tasks.map((t) => t.id)).toEqual([taskId]);
    console.log(
      `[faults] SIGSTOP worker (safe to retry): taken over, late result fenced; ${Date.now() - started} ms`,
    );
  }, 90_000);

  it("fails a turn that is not safe to retry with worker_lost, and fences off the late result", async () => {
    const started = Date.now();
    const backend = "pause-once";
    const paused = await startWorker(backend);
    const { taskId, sessionId, input } = await submitTo(backend, false, paused);
    paused.child.kill("SIGSTOP");
    await new Promise((r) => setTimeout(r, pauseMs));

    const task = await settled(taskId);
    expect(task.status).toBe(TaskStatus.FAILED);
    expect(task.failure?.category).toBe("worker_lost");
    expect(await transcript(sessionId)).toEqual([input]);

    paused.child.kill("SIGCONT");
    await lateResult(paused, taskId);
    const after = await clients.tasks.getTask({ taskId });
    expect(after.task?.status).toBe(TaskStatus.FAILED);
    expect(after.task?.failure?.category).toBe("worker_lost");
    expect(after.task?.output).toEqual([]);
    expect(await transcript(sessionId)).toEqual([input]);
    // The resumed worker is alive again and takes new work: nothing was wedged.
    const next = await submitTo(backend, false, paused);
    expect((await settled(next.taskId)).status).toBe(TaskStatus.COMPLETED);
    console.log(
      `[faults] SIGSTOP worker (not safe to retry): worker_lost, late result fenced; ${Date.now() - started} ms`,
    );
  }, 90_000);
});
