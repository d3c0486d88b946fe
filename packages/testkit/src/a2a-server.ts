/**
 * A remote A2A agent for tests, built with `@a2a-js/sdk` (its default request
 * handler, in-memory task store and express JSON-RPC / card handlers) on a
 * free loopback port. What it does depends on the message text:
 *
 * - `ask …`: asks a question (`input-required`); the next message on the
 *   task completes it with `Forecast for <answer>: sunny`;
 * - `slow …`: works until canceled (`cancelTask`), then reports `canceled`;
 * - `fail …`: fails (`failed`, with a reason);
 * - anything else: `Echo: <text>`, streamed as artifact chunks of 4
 *   characters, then completed.
 *
 * It records the Authorization header of every JSON-RPC call, the messages
 * it got and the tasks it was asked to cancel.
 */
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type AgentCard, Role, type Task, TaskState } from "@a2a-js/sdk";
import {
  AgentEvent,
  type AgentExecutor,
  DefaultRequestHandler,
  type ExecutionEventBus,
  InMemoryTaskStore,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import express from "express";
import { a2aText, a2aTextMessage } from "./a2a-client.js";

/** Options of {@link startA2aTestAgent}. */
export interface A2aTestAgentOptions {
  /** The bearer token every JSON-RPC call must carry (none: no check). */
  token?: string;
  /** What the card declares (default true). */
  streaming?: boolean;
  /** The card's input modes (default text and JSON). */
  inputModes?: string[];
}

/** A running test agent. */
export interface A2aTestAgent {
  /** The card's URL (`…/.well-known/agent-card.json`). */
  cardUrl: string;
  /** Authorization headers of the JSON-RPC calls, in order. */
  authorizations: (string | undefined)[];
  /** Texts of the messages received, in order. */
  received: string[];
  /** Ids of the tasks a cancel reached (and was confirmed for). */
  canceled: string[];
  close(): Promise<void>;
}

/** Start a test agent; `close()` it after. */
export async function startA2aTestAgent(options: A2aTestAgentOptions = {}): Promise<A2aTestAgent> {
  const authorizations: (string | undefined)[] = [];
  const received: string[] = [];
  const canceled: string[] = [];
  const waiting = new Map<string, () => void>();
  const contexts = new Map<string, string>();
  let base = "";

  const status = (
    bus: ExecutionEventBus,
    task: { id: string; contextId: string },
    state: TaskState,
    text?: string,
  ) =>
    bus.publish(
      AgentEvent.statusUpdate({
        taskId: task.id,
        contextId: task.contextId,
        status: {
          state,
          message:
            text === undefined
              ? undefined
              : a2aTextMessage(text, {
                  role: Role.ROLE_AGENT,
                  taskId: task.id,
                  contextId: task.contextId,
                }),
          timestamp: new Date().toISOString(),
        },
        metadata: undefined,
      }),
    );

  const executor: AgentExecutor = {
    async execute(context: RequestContext, bus: ExecutionEventBus) {
      const { taskId: id, contextId } = context;
      const message = context.userMessage;
      const text = a2aText(message);
      received.push(text);
      contexts.set(id, contextId);
      const current: Task = context.task ?? {
        id,
        contextId,
        status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: undefined },
        artifacts: [],
        history: [message],
        metadata: undefined,
      };
      bus.publish(AgentEvent.task(current));
      const task = { id, contextId };
      if (context.task?.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED) {
        status(bus, task, TaskState.TASK_STATE_COMPLETED, `Forecast for ${text}: sunny`);
        bus.finished();
        return;
      }
      if (text.startsWith("fail")) {
        status(bus, task, TaskState.TASK_STATE_FAILED, "the weather service is down");
        bus.finished();
        return;
      }
      if (text.startsWith("ask")) {
        status(bus, task, TaskState.TASK_STATE_INPUT_REQUIRED, "Which city?");
        bus.finished();
        return;
      }
      status(bus, task, TaskState.TASK_STATE_WORKING);
      if (text.startsWith("slow")) {
        await new Promise<void>((resolve) => waiting.set(id, resolve));
        return; // cancelTask published the end
      }
      const reply = `Echo: ${text}`;
      for (let i = 0; i < reply.length; i += 4) {
        bus.publish(
          AgentEvent.artifactUpdate({
            taskId: id,
            contextId,
            artifact: {
              artifactId: "reply",
              name: "reply",
              description: "",
              parts: [
                {
                  content: { $case: "text", value: reply.slice(i, i + 4) },
                  metadata: undefined,
                  filename: "",
                  mediaType: "text/plain",
                },
              ],
              metadata: undefined,
              extensions: [],
            },
            append: i > 0,
            lastChunk: i + 4 >= reply.length,
            metadata: undefined,
          }),
        );
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
      status(bus, task, TaskState.TASK_STATE_COMPLETED);
      bus.finished();
    },
    async cancelTask(taskId: string, bus: ExecutionEventBus) {
      canceled.push(taskId);
      status(
        bus,
        { id: taskId, contextId: contexts.get(taskId) ?? "" },
        TaskState.TASK_STATE_CANCELED,
      );
      bus.finished();
      waiting.get(taskId)?.();
      waiting.delete(taskId);
    },
  };

  const card = (): AgentCard => ({
    name: "weather",
    description: "A test agent built with @a2a-js/sdk",
    supportedInterfaces: [
      { url: `${base}/rpc`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: "1.0" },
    ],
    provider: undefined,
    version: "1.0.0",
    capabilities: {
      streaming: options.streaming ?? true,
      pushNotifications: false,
      extensions: [],
      extendedAgentCard: false,
    },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: options.inputModes ?? ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain"],
    skills: [],
    signatures: [],
  });

  const store = new InMemoryTaskStore();
  // Built at the first call: the card names the port, known once listening.
  let rpc: express.RequestHandler | undefined;
  const rpcHandler = () => {
    rpc ??= jsonRpcHandler({
      requestHandler: new DefaultRequestHandler(card(), store, executor),
      userBuilder: UserBuilder.noAuthentication,
    });
    return rpc;
  };

  const app = express();
  app.use(
    "/.well-known/agent-card.json",
    agentCardHandler({ agentCardProvider: async () => card() }),
  );
  app.use("/rpc", (req, res, next) => {
    authorizations.push(req.headers.authorization);
    if (options.token !== undefined && req.headers.authorization !== `Bearer ${options.token}`) {
      res.status(401).set("www-authenticate", "Bearer").json({ error: "unauthenticated" });
      return;
    }
    rpcHandler()(req, res, next);
  });
  const server: Server = await new Promise((resolve) => {
    const s = app.listen(0, "127.0.0.1", () => resolve(s));
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    cardUrl: `${base}/.well-known/agent-card.json`,
    authorizations,
    received,
    canceled,
    close: () =>
      new Promise<void>((resolve) => {
        for (const release of waiting.values()) release();
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
