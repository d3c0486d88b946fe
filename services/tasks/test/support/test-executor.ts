/**
 * The executor the tests run turns on: the real scripted backend (the
 * deterministic agent), plus two test backends that make timing and failure
 * controllable — "gate" (a turn that waits until the test opens it, or
 * until it is aborted unless its definition says `ignore_abort`) and
 * "broken" (a backend that throws) — all behind a
 * probe that records how many turns of one session run at once.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { MessageSchema, Role } from "@trellis/contracts/core";
import {
  type AgentExecutor,
  createLocalExecutor,
  createScriptedAdapter,
  type ExecutionAdapter,
  type ExecutionRequest,
  type ExecutionResult,
} from "@trellis/execution";

/** What the probe saw. */
export interface ExecutionProbe {
  /** Most turns of one session that ever ran at the same time (must stay 1). */
  maxConcurrentPerSession(): number;
  /** Task ids in the order their turns started, per session. */
  starts(sessionId: string): string[];
  /** Histories the backend was given, by task id. */
  history(taskId: string): number | undefined;
  /**
   * How the task's last turn ended at the backend (its result's status, or
   * `threw`); undefined while it runs or if it never started.
   */
  ended(taskId: string): ExecutionResult["status"] | "threw" | undefined;
}

/** Opens "gate" turns. */
export interface Gates {
  /** Resolves once the task's gate turn is running. */
  started(taskId: string): Promise<void>;
  /** Let the task's gate turn complete. */
  open(taskId: string): void;
}

function text(role: Role, value: string) {
  return create(MessageSchema, {
    role,
    parts: [{ kind: { case: "text", value: { text: value } } }],
  });
}

function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/** The deferred of `id` in `map`, made on first ask (by the waiter or the opener). */
function slot(map: Map<string, ReturnType<typeof deferred>>, id: string) {
  let d = map.get(id);
  if (!d) {
    d = deferred();
    map.set(id, d);
  }
  return d;
}

function createGateAdapter(
  gates: Map<string, ReturnType<typeof deferred>>,
  started: Map<string, ReturnType<typeof deferred>>,
): ExecutionAdapter {
  return {
    backendId: "gate",
    async execute(request: ExecutionRequest): Promise<ExecutionResult> {
      const definition = request.agent.definition as { tool_call?: string; ignore_abort?: boolean };
      // A turn that has asked for a tool and waits for it.
      const partial = definition.tool_call
        ? [
            create(MessageSchema, {
              role: Role.ASSISTANT,
              toolCalls: [{ id: `call_${request.taskId}`, name: definition.tool_call }],
            }),
          ]
        : [];
      slot(started, request.taskId).resolve();
      const aborted = new Promise<void>((resolve) =>
        request.signal.addEventListener("abort", () => resolve(), { once: true }),
      );
      // `ignore_abort`: a backend that does not stop when aborted (only its gate ends it).
      await Promise.race([
        slot(gates, request.taskId).promise,
        ...(definition.ignore_abort ? [] : [aborted]),
      ]);
      if (request.signal.aborted) return { status: "cancelled", messages: partial };
      return { status: "completed", messages: [text(Role.ASSISTANT, "gate opened")] };
    },
  };
}

const brokenAdapter: ExecutionAdapter = {
  backendId: "broken",
  async execute(): Promise<ExecutionResult> {
    throw new Error("backend exploded");
  },
};

/** A test executor and its instruments. */
export function createTestExecutor(): {
  executor: AgentExecutor;
  probe: ExecutionProbe;
  gates: Gates;
} {
  const open = new Map<string, ReturnType<typeof deferred>>();
  const started = new Map<string, ReturnType<typeof deferred>>();
  const inner = createLocalExecutor([
    createScriptedAdapter(),
    createGateAdapter(open, started),
    brokenAdapter,
  ]);
  const active = new Map<string, number>();
  const starts = new Map<string, string[]>();
  const histories = new Map<string, number>();
  const endings = new Map<string, ExecutionResult["status"] | "threw">();
  let max = 0;
  const executor: AgentExecutor = {
    backends: () => inner.backends(),
    validateDefinition: (backend: string, definition: JsonObject) =>
      inner.validateDefinition(backend, definition),
    async execute(request) {
      const now = (active.get(request.sessionId) ?? 0) + 1;
      active.set(request.sessionId, now);
      max = Math.max(max, now);
      const list = starts.get(request.sessionId) ?? [];
      list.push(request.taskId);
      starts.set(request.sessionId, list);
      histories.set(request.taskId, request.history.length);
      endings.delete(request.taskId);
      try {
        const result = await inner.execute(request);
        endings.set(request.taskId, result.status);
        return result;
      } catch (error) {
        endings.set(request.taskId, "threw");
        throw error;
      } finally {
        active.set(request.sessionId, (active.get(request.sessionId) ?? 1) - 1);
      }
    },
  };
  return {
    executor,
    probe: {
      maxConcurrentPerSession: () => max,
      starts: (sessionId) => starts.get(sessionId) ?? [],
      history: (taskId) => histories.get(taskId),
      ended: (taskId) => endings.get(taskId),
    },
    gates: {
      started: (taskId) => slot(started, taskId).promise,
      open: (taskId) => slot(open, taskId).resolve(),
    },
  };
}
