/**
 * The set-up of routing tests and benchmarks: a distributed router on a test
 * NATS server (remote workers only, its work kept in memory), plain user
 * turns for a backend, and runs that collect a turn's events.
 */
import type {
  ExecutionAgent,
  ExecutionEvent,
  ExecutionRequest,
  ExecutionResult,
} from "@trellis/adapter-sdk";
import { chatToMessage } from "@trellis/messages";
import { createRoutedExecutor, type RoutedExecutor } from "../routing/routed-executor.js";

/**
 * The env of a distributed router on the NATS server at `natsUrl`, its
 * streams and subjects under `prefix`, its work kept in memory (no
 * database); `more` adds settings (TRELLIS_ADAPTERS_GRACE, …).
 */
export function distributedRouterEnv(
  natsUrl: string,
  prefix: string,
  more: Readonly<Record<string, string>> = {},
): Record<string, string> {
  return {
    NATS_URL: natsUrl,
    TRELLIS_NATS_PREFIX: prefix,
    TRELLIS_ADAPTERS_WORK_STORAGE: "memory",
    ...more,
  };
}

/**
 * A router on {@link distributedRouterEnv} without in-process backends (it
 * places on remote workers only), started; the caller stops it.
 */
export async function startDistributedRouter(
  natsUrl: string,
  prefix: string,
  more: Readonly<Record<string, string>> = {},
): Promise<RoutedExecutor> {
  const routed = createRoutedExecutor({
    mode: "distributed",
    adapters: [],
    env: distributedRouterEnv(natsUrl, prefix, more),
  });
  await routed.start();
  return routed;
}

/**
 * A user turn saying `text` to an agent on `agent` (a backend id, or the
 * agent's fields besides the defaults), with test ids and an abort signal of
 * its own; `over` replaces any field.
 */
export function userTurn(
  agent: string | (Pick<ExecutionAgent, "backend"> & Partial<ExecutionAgent>),
  text: string,
  over: Partial<ExecutionRequest> = {},
): ExecutionRequest {
  return {
    taskId: "tsk_1",
    sessionId: "ses_1",
    workspaceId: "ws_1",
    agent: {
      id: "agt_1",
      definition: {},
      tools: [],
      ...(typeof agent === "string" ? { backend: agent } : agent),
    },
    history: [],
    input: chatToMessage({ role: "user", content: text }),
    signal: new AbortController().signal,
    ...over,
  };
}

/** Runs `request` on `executor` (an adapter, a router), collecting the turn's events. */
export async function runCollecting(
  executor: { execute(request: ExecutionRequest): Promise<ExecutionResult> },
  request: ExecutionRequest,
): Promise<{ result: ExecutionResult; events: ExecutionEvent[] }> {
  const events: ExecutionEvent[] = [];
  const result = await executor.execute({ ...request, onEvent: (e) => events.push(e) });
  return { result, events };
}

/** The placements among a turn's events (one per attempt). */
export const routedEvents = (events: readonly ExecutionEvent[]) =>
  events.filter((e): e is Extract<ExecutionEvent, { kind: "routed" }> => e.kind === "routed");
