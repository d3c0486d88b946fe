// The health watchdog's sweep against services answered in memory: which
// session logs it reads, what it reports stuck, and what it cancels. A
// `flag_only` session (the default policy) is read only once its turn is old
// enough to be stuck; a `cancel_turn` session is read every sweep.
import { create, type DescService } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { EventSchema, TaskStatus } from "@trellis/contracts/core";
import { EventService, SessionService, TaskService } from "@trellis/contracts/tasks";
import type { ServiceClients } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import { describe, expect, it } from "vitest";
import { HealthWatchdog } from "../src/health/watchdog.js";

const T0 = Date.UTC(2026, 11, 2, 12, 0, 0);
const WORKSPACE = "ws_watchdog";

interface Turn {
  sessionId: string;
  taskId: string;
  /** When the task was created and its one event recorded (ms after T0). */
  at: number;
  policy: Record<string, unknown>;
}

/** The three services the watchdog calls, answered from `turns`; log reads counted by session. */
function services(turns: readonly Turn[]) {
  const reads = new Map<string, number>();
  const canceled: string[] = [];
  const turnOf = (sessionId: string) => turns.find((t) => t.sessionId === sessionId) as Turn;
  const impls = new Map<DescService, unknown>([
    [
      TaskService,
      {
        listTasks: async () => ({
          tasks: turns.map((t) => ({
            id: t.taskId,
            workspaceId: WORKSPACE,
            sessionId: t.sessionId,
            status: TaskStatus.WORKING,
            createdAt: timestampFromMs(T0 + t.at),
          })),
          nextPageToken: "",
        }),
        cancelTask: async (req: { taskId: string }) => {
          canceled.push(req.taskId);
          return {};
        },
      },
    ],
    [
      SessionService,
      {
        getSession: async (req: { sessionId: string }) => ({
          session: {
            id: req.sessionId,
            workspaceId: WORKSPACE,
            metadata: { health_policy: turnOf(req.sessionId).policy },
          },
        }),
      },
    ],
    [
      EventService,
      {
        listEvents: async (req: { sessionId: string; afterEventId: string }) => {
          reads.set(req.sessionId, (reads.get(req.sessionId) ?? 0) + 1);
          const turn = turnOf(req.sessionId);
          const started = create(EventSchema, {
            id: `evt_${turn.taskId}`,
            kind: "task.started",
            workspaceId: WORKSPACE,
            sessionId: turn.sessionId,
            taskId: turn.taskId,
            createdAt: timestampFromMs(T0 + turn.at),
            resource: { object: "task", id: turn.taskId },
            payload: {
              kind: {
                case: "taskStatusChanged",
                value: { status: TaskStatus.WORKING, previousStatus: 0, reason: "" },
              },
            },
          });
          return { events: req.afterEventId === "" ? [started] : [], hasMore: false };
        },
      },
    ],
  ]);
  const clients: ServiceClients = {
    get: (<T extends DescService>(service: T) => impls.get(service)) as ServiceClients["get"],
  };
  return { clients, reads, canceled };
}

function watchdog(clients: ServiceClients, clock: { now: number }) {
  return new HealthWatchdog({
    clients,
    logger: createLogger({ service: "gateway", level: "error", write: () => {} }),
    // `sweep()` is called directly: the sweeping lock is never taken.
    db: {} as Database<unknown>,
    intervalMs: 1_000,
    now: () => clock.now,
  });
}

describe("health watchdog sweep", () => {
  it("reads a flag_only session's log only once its turn could be stuck", async () => {
    const { clients, reads } = services([
      { sessionId: "ses_quiet", taskId: "task_quiet", at: 0, policy: { stuck_after_seconds: 30 } },
    ]);
    const clock = { now: T0 + 29_000 };
    const dog = watchdog(clients, clock);

    expect(await dog.sweep()).toEqual({ sessions: 1, canceled: [], stuck: [] });
    expect(reads.get("ses_quiet")).toBeUndefined();

    clock.now = T0 + 31_000;
    expect(await dog.sweep()).toEqual({ sessions: 1, canceled: [], stuck: ["task_quiet"] });
    expect(reads.get("ses_quiet")).toBe(1);

    // From then on it is followed every sweep (incrementally), and reported once.
    clock.now = T0 + 32_000;
    expect(await dog.sweep()).toEqual({ sessions: 1, canceled: [], stuck: [] });
    expect(reads.get("ses_quiet")).toBe(2);
  });

  it("reads a cancel_turn session every sweep and cancels a turn over its limit", async () => {
    const { clients, reads, canceled } = services([
      {
        sessionId: "ses_strict",
        taskId: "task_strict",
        at: 0,
        policy: { stuck_after_seconds: 30, max_runtime_minutes: 1, action: "cancel_turn" },
      },
      { sessionId: "ses_young", taskId: "task_young", at: 0, policy: {} },
    ]);
    const clock = { now: T0 + 1_000 };
    const dog = watchdog(clients, clock);

    expect(await dog.sweep()).toEqual({ sessions: 2, canceled: [], stuck: [] });
    expect(reads.get("ses_strict")).toBe(1);
    // The default policy flags a turn stuck after 120 s: nothing to read yet.
    expect(reads.get("ses_young")).toBeUndefined();

    clock.now = T0 + 61_000;
    const report = await dog.sweep();
    expect(report.canceled).toEqual(["task_strict"]);
    expect(canceled).toEqual(["task_strict"]);
    expect(reads.get("ses_strict")).toBe(2);
    expect(reads.get("ses_young")).toBeUndefined();
  });
});
