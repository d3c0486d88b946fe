/**
 * Test support for the chat suites: an embedded Trellis (tasks + chat) on a
 * free port, gRPC clients over a real socket, scripted agents, and a reader
 * for server streams with timeouts.
 */
import {
  fromJson,
  type JsonObject,
  type JsonValue,
  type MessageInitShape,
  toJsonString,
} from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { type Client, createClient, createRouterTransport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ChatService,
  type ChatTurnOutcome,
  ChatTurnOutcomeSchema,
  type SubscribeRequestSchema,
  type SubscribeResponse,
} from "@trellis/contracts/chat";
import { AgentService, SessionService, SignalService } from "@trellis/contracts/tasks";
import {
  createMeshClientInterceptor,
  type EmbeddedTrellis,
  processMeshCredentials,
  type RunningService,
  runService,
  runServices,
  startEmbedded,
} from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { openDeployment } from "@trellis/testkit/deployment";
import { expect } from "vitest";
import { chatService } from "../src/index.js";

/** Clients of a running mesh (tasks + chat), in any mode, and how to stop it. */
export interface ChatClients {
  chat: Client<typeof ChatService>;
  agents: Client<typeof AgentService>;
  signals: Client<typeof SignalService>;
  sessions: Client<typeof SessionService>;
  close(): Promise<void>;
}

/** Clients of chat at `chatUrl` and of tasks at `tasksUrl` (gRPC over h2c). */
export function clientsAt(
  chatUrl: string,
  tasksUrl: string,
  close: () => Promise<void>,
): ChatClients {
  // Direct calls, as another mesh service would make them (service credentials).
  const interceptors = [createMeshClientInterceptor(processMeshCredentials(), "test")];
  const chat = createGrpcTransport({ baseUrl: chatUrl, interceptors });
  const tasks =
    chatUrl === tasksUrl ? chat : createGrpcTransport({ baseUrl: tasksUrl, interceptors });
  return {
    chat: createClient(ChatService, chat),
    agents: createClient(AgentService, tasks),
    signals: createClient(SignalService, tasks),
    sessions: createClient(SessionService, tasks),
    close,
  };
}

/** A running embedded mesh and clients of it over gRPC. */
export interface ChatHarness extends ChatClients {
  trellis: EmbeddedTrellis;
  /**
   * Another chat replica: a second instance of the chat service over the same
   * tasks service (chat keeps no state of its own), reached in memory.
   */
  replica(): Promise<Client<typeof ChatService>>;
}

/** Start tasks + chat embedded on a free port (in-memory PGlite). */
export async function startChatHarness(env: Record<string, string> = {}): Promise<ChatHarness> {
  const logger = createLogger({ service: "chat-test", level: "error", write: () => {} });
  const trellis = await startEmbedded({
    services: [tasksService, chatService],
    port: 0,
    logger,
    env,
  });
  const url = trellis.address.url;
  return {
    ...clientsAt(url, url, () => trellis.close({ graceMs: 100 })),
    trellis,
    async replica() {
      const context = trellis.contexts.get("chat");
      if (!context) throw new Error("no chat context");
      const module = await chatService.create(context);
      const routes = module.routes;
      if (!routes) throw new Error("chat has no routes");
      return createClient(ChatService, createRouterTransport(routes));
    },
  };
}

/** A distributed deployment: tasks + chat as `runService` instances on PostgreSQL + JetStream. */
export interface DistributedChat extends ChatClients {
  tasks: RunningService;
  chatService: RunningService;
  /** Environment shared by every service of the deployment (DATABASE_URL, NATS_URL, prefix…). */
  env: Record<string, string>;
}

/**
 * Start tasks and chat as separate services (each its own server on its own
 * port, chat reaching tasks over h2c through TRELLIS_TASKS_URL) on a fresh
 * database and NATS prefix; `close` stops both and removes the database and
 * streams.
 */
export async function startDistributedChat(
  extraEnv: Record<string, string> = {},
): Promise<DistributedChat> {
  const deployment = await openDeployment("trellis_chat", runService, {
    prefix: "chat",
    env: extraEnv,
  });
  const cleanup = () => deployment.close().catch(() => undefined);
  try {
    const tasks = await deployment.start(tasksService);
    const tasksEnv = { TRELLIS_TASKS_URL: tasks.address.url };
    const chat = await deployment.start(chatService, tasksEnv);
    return {
      ...clientsAt(chat.address.url, tasks.address.url, cleanup),
      tasks,
      chatService: chat,
      env: { ...deployment.env, ...tasksEnv },
    };
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/**
 * Start tasks and chat in one distributed process (`runServices`, as
 * `trellis serve tasks,chat` and `trellis mesh` run them): one server,
 * chat's calls to tasks in memory, on a fresh database and NATS prefix.
 */
export async function startCoHostedChat(): Promise<ChatClients> {
  const deployment = await openDeployment("trellis_chat_cohost", runServices, {
    prefix: "chatco",
  });
  const cleanup = () => deployment.close().catch(() => undefined);
  try {
    const running = await deployment.start([tasksService, chatService]);
    return clientsAt(running.address.url, running.address.url, cleanup);
  } catch (error) {
    await cleanup();
    throw error;
  }
}

/** Register a scripted graph agent; returns its id. */
export async function scriptedAgent(
  harness: Pick<ChatClients, "agents">,
  name: string,
  graph: JsonObject,
): Promise<string> {
  const { agent } = await harness.agents.createAgent({
    agent: { name, backend: "scripted", definition: graph },
  });
  if (!agent?.id) throw new Error("CreateAgent returned no id");
  return agent.id;
}

/** A graph with one update node appending `messages`. */
export function replyGraph(messages: JsonObject[]): JsonObject {
  return {
    entry: "reply",
    nodes: { reply: { update: { messages } } },
    edges: [{ from: "reply", to: "END" }],
  };
}

/** A graph that fails with a category (harness §10 / llm-provider §7). */
export function raiseGraph(category: string, message: string): JsonObject {
  return {
    entry: "fail",
    nodes: { fail: { raise: { category, message } } },
    edges: [{ from: "fail", to: "END" }],
  };
}

/**
 * The approval graph of harness-chat §8.1: a pending message, then suspend;
 * on resume, `approved: true` sends, anything else declines. Its state keeps
 * `approved` (fixture 006), which the resume's payload writes.
 */
export const approvalGraph: JsonObject = {
  state: { fields: { approved: { type: "bool", default: false } } },
  entry: "pending",
  nodes: {
    pending: {
      update: {
        messages: [{ role: "assistant", content: "I'm waiting for approval to send this email." }],
      },
    },
    approve: { suspend: { signal_id: "approval", metadata: { kind: "approval" } } },
    sent: { update: { messages: [{ role: "assistant", content: "Email sent." }] } },
    declined: { update: { messages: [{ role: "assistant", content: "OK, I won't send it." }] } },
  },
  edges: [
    { from: "pending", to: "approve" },
    { from: "approve", to: "sent", when: { path: "approved", equals: true } },
    { from: "approve", to: "declined" },
    { from: "sent", to: "END" },
    { from: "declined", to: "END" },
  ],
};

/** Reads a server stream one element at a time, with timeouts. */
export class StreamReader<T> {
  private readonly iterator: AsyncIterator<T>;
  private pending: Promise<IteratorResult<T>> | undefined;

  constructor(
    stream: AsyncIterable<T>,
    private readonly abort?: AbortController,
  ) {
    this.iterator = stream[Symbol.asyncIterator]();
  }

  private pull(): Promise<IteratorResult<T>> {
    this.pending ??= this.iterator.next();
    return this.pending;
  }

  /** The next element; fails after `timeoutMs` or when the stream ends. */
  async next(timeoutMs = 10_000): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no stream element in ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    try {
      const result = await Promise.race([this.pull(), timeout]);
      this.pending = undefined;
      if (result.done) throw new Error("the stream ended");
      return result.value;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Resolves when nothing arrives for `ms`; fails with what arrived otherwise. */
  async expectQuiet(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const quiet = new Promise<"quiet">((resolve) => {
      timer = setTimeout(() => resolve("quiet"), ms);
    });
    const result = await Promise.race([this.pull(), quiet]);
    clearTimeout(timer);
    if (result !== "quiet") {
      throw new Error(
        `expected no element, got ${JSON.stringify(result, (_, v) => (typeof v === "bigint" ? String(v) : v))}`,
      );
    }
  }

  close(): void {
    this.abort?.abort();
  }
}

/** A signal payload (google.protobuf.Value) from JSON. */
export function payload(json: JsonValue) {
  return fromJson(ValueSchema, json);
}

/**
 * The `kind` variant of a turn's outcome; fails (showing the outcome) when
 * the turn ended otherwise.
 */
export function outcomeVariant<K extends "completed" | "errored" | "suspended">(
  outcome: ChatTurnOutcome | undefined,
  kind: K,
) {
  const shown = outcome ? toJsonString(ChatTurnOutcomeSchema, outcome) : "no outcome";
  expect(outcome?.kind.case, shown).toBe(kind);
  if (outcome?.kind.case !== kind) throw new Error(`not ${kind}`);
  return outcome.kind.value as Extract<ChatTurnOutcome["kind"], { case: K }>["value"];
}

/** A reader of `h`'s chat Subscribe stream for `request`; closing it ends the call. */
export function subscribeReader(
  h: ChatClients,
  request: MessageInitShape<typeof SubscribeRequestSchema>,
): StreamReader<SubscribeResponse> {
  const abort = new AbortController();
  return new StreamReader<SubscribeResponse>(
    h.chat.subscribe(request, { signal: abort.signal }),
    abort,
  );
}

/**
 * Approves the turn `taskId` paused in `sessionId`: `approved: true` by the
 * signal id its graph's author wrote reaches that turn, and `listener` (a
 * subscriber on the session) reads the turn's resumed outcome, returned.
 */
export async function approveResumed(
  h: ChatClients,
  listener: StreamReader<SubscribeResponse>,
  paused: { sessionId: string; signalId: string; taskId: string },
): Promise<ChatTurnOutcome | undefined> {
  const { sessionId, signalId, taskId } = paused;
  const delivered = await h.signals.deliver({
    sessionId,
    signalId,
    payload: payload({ approved: true }),
  });
  expect(delivered.taskId).toBe(taskId);
  const next = await listener.next();
  expect(next.kind.case).toBe("outcome");
  const resumed = next.kind.case === "outcome" ? next.kind.value : undefined;
  expect(resumed?.taskId).toBe(taskId);
  return resumed;
}
