/** Messages, agents and waits the suites share. */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import type { Message } from "@trellis/contracts/core";
import { AgentSchema, BusyPolicy } from "@trellis/contracts/tasks";
import { errorDetailOf } from "@trellis/runtime";
import { expect } from "vitest";
import type { NewTask, TaskStore, WriteContext } from "../../src/store/task-store.js";
import { createAgent, text, watchUntil } from "../../src/testing/clients.js";

/** Scripted graph: greet, wait for approval, then done / nope. */
export { APPROVAL_GRAPH } from "@trellis/execution/testing";
export { createAgent, text, watchUntil };

/** The text of a message's text parts. */
export function textOf(message: Message | undefined): string {
  return (message?.parts ?? [])
    .flatMap((p) => (p.kind.case === "text" ? [p.kind.value.text] : []))
    .join("");
}

/** Scripted graph: asks for a tool (assistant tool call), then waits for an auth signal. */
export const TOOL_AUTH_GRAPH: JsonObject = {
  entry: "call",
  nodes: {
    call: {
      update: {
        messages: [
          {
            role: "assistant",
            tool_calls: [{ id: "call_deploy", name: "deploy", arguments: { env: "prod" } }],
          },
        ],
      },
    },
    wait: { suspend: { signal_id: "oauth", kind: "auth", metadata: { provider: "github" } } },
    result: {
      update: {
        messages: [
          { role: "tool", tool_call_id: "call_deploy", content: "deployed" },
          { role: "assistant", content: "Deployed." },
        ],
      },
    },
  },
  edges: [
    { from: "call", to: "wait" },
    { from: "wait", to: "result" },
  ],
};

/** Scripted graph: fails at once. */
export const FAILING_GRAPH: JsonObject = {
  entry: "boom",
  nodes: {
    boom: { raise: { category: "provider_invalid_request", message: "the model refused" } },
  },
};

/** Scripted graph: echoes after `ms` milliseconds (abortable). */
export function slowEcho(ms: number): JsonObject {
  return {
    entry: "reply",
    nodes: {
      reply: { update: { messages: [{ role: "assistant", content: "{{input}}" }], delay_ms: ms } },
    },
  };
}

/**
 * Store a scripted agent straight into a task store (no executor check) and
 * return its id. Its graph writes nothing: the store suites finish its runs
 * by hand.
 */
export async function createStoreAgent(
  store: Pick<TaskStore, "createAgent">,
  context: WriteContext,
  name = "echo",
): Promise<string> {
  const agent = await store.createAgent(
    create(AgentSchema, {
      workspaceId: "default",
      name,
      backend: "scripted",
      definition: { entry: "a", nodes: { a: { update: { messages: [] } } } },
    }),
    undefined,
    context,
  );
  return agent.id;
}

/**
 * A user's turn `words` to session `sessionId` of the default workspace, as
 * the store suites submit it: queued if the session is busy, the session
 * created if it is new, and with `key` an idempotency key over the words.
 */
export function newTask(agentId: string, sessionId: string, words: string, key?: string): NewTask {
  return {
    sessionId,
    agentId,
    input: text(words),
    busyPolicy: BusyPolicy.ENQUEUE,
    parentTaskId: "",
    createSession: true,
    workspaceId: "default",
    ...(key ? { idempotency: { key, requestHash: `hash-${words}` } } : {}),
  };
}

/** Assert a call fails with a Connect error carrying `reason`; returns the error. */
export async function expectReason(
  promise: Promise<unknown>,
  reason: string,
): Promise<ConnectError> {
  try {
    await promise;
  } catch (error) {
    expect(error).toBeInstanceOf(ConnectError);
    const detail = errorDetailOf(error as ConnectError);
    expect(detail?.reason, (error as Error).message).toBe(reason);
    return error as ConnectError;
  }
  throw new Error(`expected a failure with reason ${reason}`);
}
