/**
 * The harness on the real task path: a tasks service in distributed mode
 * (real PostgreSQL and JetStream) whose executor runs the scripted and
 * harness backends, with the harness talking to the recorded OpenAI server.
 * A turn runs end to end into the session transcript; an approval-gated tool
 * pauses the task (INPUT_REQUIRED) until an approval signal, and runs once
 * even when the signal is delivered twice; the model's clarifying question
 * (`ask_user`) pauses it until an answer signal.
 */
import { fromJson, type JsonObject } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { type Message, Role, TaskStatus } from "@trellis/contracts/core";
import {
  AgentService,
  SessionService,
  SignalService,
  type Task,
  TaskService,
} from "@trellis/contracts/tasks";
import { errorDetailOf } from "@trellis/runtime";
import { uniqueName } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTools, userText } from "../../src/testing/harness-agents.js";
import { weatherAgent, weatherTurn } from "../../src/testing/recorded-harness.js";
import { enqueueChat, type RecordedServer } from "../../src/testing/recorded-server.js";
import { type HarnessTasks, startHarnessTasks } from "./support/fixture.js";

let setup: HarnessTasks;
let server: RecordedServer;
const tools = createTools();
let clients: {
  agents: ReturnType<typeof createClient<typeof AgentService>>;
  sessions: ReturnType<typeof createClient<typeof SessionService>>;
  tasks: ReturnType<typeof createClient<typeof TaskService>>;
  signals: ReturnType<typeof createClient<typeof SignalService>>;
};

beforeAll(async () => {
  setup = await startHarnessTasks("harness_tasks", tools.tools);
  server = setup.server;
  clients = {
    agents: createClient(AgentService, setup.transport),
    sessions: createClient(SessionService, setup.transport),
    tasks: createClient(TaskService, setup.transport),
    signals: createClient(SignalService, setup.transport),
  };
});

afterAll(async () => {
  await setup?.close();
});

async function createAgent(name: string, definition: JsonObject): Promise<string> {
  const { agent } = await clients.agents.createAgent({
    agent: { name, backend: "harness", definition },
  });
  return agent?.id as string;
}

async function settle(taskId: string): Promise<Task> {
  let last: Task | undefined;
  for await (const { task } of clients.tasks.watchTask(
    { taskId, untilSettled: true },
    { signal: AbortSignal.timeout(20_000) },
  )) {
    last = task;
  }
  if (!last) throw new Error(`no update for ${taskId}`);
  return last;
}

async function transcript(sessionId: string): Promise<Message[]> {
  const { messages } = await clients.sessions.listMessages({ sessionId, pageSize: 100 });
  return messages.map((m) => m.message as Message);
}

function summary(messages: readonly Message[]) {
  return messages.map((m) => {
    const text = m.parts.flatMap((p) => (p.kind.case === "text" ? [p.kind.value.text] : []));
    return [Role[m.role], text.join(""), m.toolCalls.map((c) => c.name).join(","), m.toolCallId];
  });
}

describe("harness agents on the task path (PostgreSQL + JetStream)", () => {
  it("runs a tool-loop turn into the transcript, with the model's usage recorded", async () => {
    const agentId = await createAgent("weather", weatherAgent({ stream: true }));
    enqueueChat(server, ...weatherTurn({ stream: true }));
    const sessionId = uniqueName("ses");
    const { task } = await clients.tasks.submitTask({
      sessionId,
      agentId,
      createSession: true,
      input: userText("What's the weather in Paris?"),
    });
    const done = await settle(task?.id as string);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    expect(server.pending()).toEqual({});

    const messages = await transcript(sessionId);
    expect(summary(messages)).toEqual([
      ["USER", "What's the weather in Paris?", "", ""],
      ["ASSISTANT", "", "get_weather", ""],
      [
        "TOOL",
        '{"city":"Paris","temperature_c":18,"sky":"sunny"}',
        "",
        "call_Q9sT4mV2aB7cD8eF9gH0iJ1k",
      ],
      ["ASSISTANT", "It's 18°C and sunny in Paris.", "", ""],
    ]);
    expect(done.output.map((m) => Role[m.role])).toEqual(["ASSISTANT", "TOOL", "ASSISTANT"]);
    // The replay records survive the store: usage of each model call, the tool's result.
    expect(messages[1]?.metadata?.["llm:main:1"]).toMatchObject({
      usage: { prompt_tokens: 82, completion_tokens: 17, total_tokens: 99 },
    });
    expect(messages[3]?.metadata?.["llm:main:2"]).toMatchObject({
      usage: { prompt_tokens: 121, completion_tokens: 11, total_tokens: 132 },
    });
    expect(messages[2]?.metadata?.["tool:call_Q9sT4mV2aB7cD8eF9gH0iJ1k"]).toMatchObject({
      status: "ok",
    });
  });

  it("pauses on an approval-gated tool and runs it once when the signal is delivered twice", async () => {
    const agentId = await createAgent("mailer", {
      provider: "openai",
      model: "gpt-4o-mini",
      tools: ["send_email"],
      stream: false,
    });
    enqueueChat(server, "openai/chat-email-tool-call.http");
    const sessionId = uniqueName("ses");
    const { task } = await clients.tasks.submitTask({
      sessionId,
      agentId,
      createSession: true,
      input: userText("Email Bob about lunch"),
    });
    const taskId = task?.id as string;
    const waiting = await settle(taskId);
    expect(waiting.status).toBe(TaskStatus.INPUT_REQUIRED);
    expect(waiting.suspension?.signalId).toBe(`${taskId}:approval:call_Em4iL5sEnD6bOb7x8Y9z0AbC`);
    expect(waiting.suspension?.metadata).toMatchObject({
      kind: "tool_approval",
      tool_name: "send_email",
      arguments: { to: "bob@example.com", subject: "Lunch", body: "Are you free at noon?" },
    });
    expect(tools.runs.send_email).toEqual([]);

    enqueueChat(server, "openai/chat-email-sent.http");
    const signalId = waiting.suspension?.signalId as string;
    const payload = fromJson(ValueSchema, { approved: true });
    const first = await clients.signals.deliver({ signalId, payload, deliveryId: "approve-1" });
    const again = await clients.signals.deliver({ signalId, payload, deliveryId: "approve-1" });
    expect(first.duplicate).toBe(false);
    expect(again.duplicate).toBe(true);
    const done = await settle(taskId);
    expect(done.status).toBe(TaskStatus.COMPLETED);
    // A second approval with a new delivery id finds nothing waiting.
    const late = await clients.signals.deliver({ signalId, payload, deliveryId: "approve-2" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(late?.code).toBe(Code.NotFound);
    expect(late && errorDetailOf(late)?.reason).toBe("resource_not_found");

    expect(tools.runs.send_email).toEqual([
      { to: "bob@example.com", subject: "Lunch", body: "Are you free at noon?" },
    ]);
    expect(summary(await transcript(sessionId))).toEqual([
      ["USER", "Email Bob about lunch", "", ""],
      ["ASSISTANT", "I'll send Bob the email.", "send_email", ""],
      ["TOOL", "sent to bob@example.com", "", "call_Em4iL5sEnD6bOb7x8Y9z0AbC"],
      ["ASSISTANT", "Done: the email to Bob is on its way.", "", ""],
    ]);
    expect(server.pending()).toEqual({});
  });

  it("pauses on the model's question (ask_user) and goes on with the answer signal", async () => {
    const agentId = await createAgent("asker", {
      provider: "openai",
      model: "gpt-4o-mini",
      tools: ["get_weather"],
      ask_user: true,
      stream: false,
    });
    enqueueChat(server, "openai/chat-ask-user-tool-call.http");
    const sessionId = uniqueName("ses");
    const { task } = await clients.tasks.submitTask({
      sessionId,
      agentId,
      createSession: true,
      input: userText("What's the weather like?"),
    });
    const taskId = task?.id as string;
    const waiting = await settle(taskId);
    expect(waiting.status).toBe(TaskStatus.INPUT_REQUIRED);
    expect(waiting.suspension?.signalId).toBe(
      `${taskId}:clarification:call_AsK7uS3r9Qx2Lm4Np6Rt8Vw0`,
    );
    expect(waiting.suspension?.metadata).toMatchObject({
      kind: "clarification",
      question: "Which city would you like the weather for?",
    });

    enqueueChat(
      server,
      "openai/chat-ask-user-weather-tool-call.http",
      "openai/chat-ask-user-final.http",
    );
    const signalId = waiting.suspension?.signalId as string;
    const payload = fromJson(ValueSchema, { answer: "Lyon" });
    const first = await clients.signals.deliver({ signalId, payload, deliveryId: "answer-1" });
    expect(first.duplicate).toBe(false);
    const done = await settle(taskId);
    expect(done.status).toBe(TaskStatus.COMPLETED);

    const messages = await transcript(sessionId);
    expect(summary(messages)).toEqual([
      ["USER", "What's the weather like?", "", ""],
      ["ASSISTANT", "", "ask_user", ""],
      ["TOOL", "Lyon", "", "call_AsK7uS3r9Qx2Lm4Np6Rt8Vw0"],
      ["ASSISTANT", "", "get_weather", ""],
      [
        "TOOL",
        '{"city":"Lyon","temperature_c":18,"sky":"sunny"}',
        "",
        "call_LyOn4wEaT5hEr6Xy7Zb8Cd9E",
      ],
      ["ASSISTANT", "It's 18°C and sunny in Lyon right now.", "", ""],
    ]);
    expect(messages[2]?.metadata?.["tool:call_AsK7uS3r9Qx2Lm4Np6Rt8Vw0"]).toMatchObject({
      name: "ask_user",
      clarification: { question: "Which city would you like the weather for?", answer: "Lyon" },
    });
    expect(server.pending()).toEqual({});
  });
});
