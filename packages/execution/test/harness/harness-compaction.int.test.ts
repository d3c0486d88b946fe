/**
 * Context compaction by the agent's model, on the real task path: a tasks
 * service in distributed mode (real PostgreSQL and JetStream) running the
 * built-in harness against the recorded OpenAI server. Past the agent's
 * budget the harness is asked once — tool-less, one step — to summarise the
 * older turns; the reply becomes the compaction checkpoint the turn (and the
 * next turns) are given, stored in `context_summaries`; a replay of the
 * compacted turn reuses the stored summary without calling the provider; a
 * summarising call that fails leaves the deterministic summary, and the turn
 * still completes.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { type Event, TaskStatus } from "@trellis/contracts/core";
import { AgentService, EventService, type Task, TaskService } from "@trellis/contracts/tasks";
import { SUMMARY_INSTRUCTION } from "@trellis/tasks";
import { eventually } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTools, userText } from "../../src/testing/harness-agents.js";
import { fixture, OPENAI_CHAT, type RecordedServer } from "../../src/testing/recorded-server.js";
import { type HarnessTasks, startHarnessTasks } from "./support/fixture.js";

let setup: HarnessTasks;
let server: RecordedServer;
let clients: {
  agents: ReturnType<typeof createClient<typeof AgentService>>;
  tasks: ReturnType<typeof createClient<typeof TaskService>>;
  events: ReturnType<typeof createClient<typeof EventService>>;
};

beforeAll(async () => {
  setup = await startHarnessTasks("harness_compaction", createTools().tools);
  server = setup.server;
  clients = {
    agents: createClient(AgentService, setup.transport),
    tasks: createClient(TaskService, setup.transport),
    events: createClient(EventService, setup.transport),
  };
}, 60_000);

afterAll(async () => {
  await setup?.close();
});

// Each long question is ≈ 107 estimated tokens, each reply ≈ 14: with a budget
// of 340 and one recent turn kept, the third turn is the first past the budget
// (turn 1 is summarised) and a short fourth turn fits under the checkpoint.
const definition = (name: string): JsonObject => ({
  provider: "openai",
  model: "gpt-4o-mini",
  system: `You are ${name}.`,
  tools: ["get_weather"],
  stream: false,
  context: { budget_tokens: 340, keep_recent_turns: 1 },
});
const longQuestion = (i: number) => `question ${i}: what's the weather?\n${"q".repeat(370)}`;

async function settle(taskId: string): Promise<Task> {
  let last: Task | undefined;
  for await (const { task } of clients.tasks.watchTask(
    { taskId, untilSettled: true },
    { signal: AbortSignal.timeout(30_000) },
  )) {
    last = task;
  }
  if (!last) throw new Error(`no update for ${taskId}`);
  return last;
}

async function turn(sessionId: string, agentId: string, input: string): Promise<Task> {
  const { task } = await clients.tasks.submitTask({
    sessionId,
    createSession: sessionId === "",
    agentId,
    input: userText(input),
  });
  const done = await settle(task?.id as string);
  expect(done.status, done.failure?.message).toBe(TaskStatus.COMPLETED);
  return done;
}

async function compactedEvents(sessionId: string): Promise<Event[]> {
  const { events } = await clients.events.listEvents({ sessionId, limit: 1000 });
  return events.filter((e) => e.kind === "context.compacted");
}

/** The session's `context.compacted` events once `count` of them reached the log (via the relay). */
async function compactedCount(sessionId: string, count: number): Promise<Event[]> {
  return eventually(
    async () => {
      const found = await compactedEvents(sessionId);
      return found.length >= count ? found : undefined;
    },
    { timeoutMs: 30_000, what: `${count} context.compacted events in ${sessionId}` },
  );
}

const dataOf = (e: Event | undefined): JsonObject =>
  e?.payload?.kind.case === "data" ? e.payload.kind.value : {};

interface ChatBody {
  messages: { role: string; content: unknown }[];
  tools?: unknown[];
}
const bodyOf = (i: number) => server.requests[i]?.body as ChatBody;
const contentOf = (m: { content: unknown } | undefined) =>
  typeof m?.content === "string" ? m.content : JSON.stringify(m?.content ?? "");

describe("compaction with the agent's model (harness, distributed)", () => {
  let sessionId = "";
  let third: Task;

  it("asks the model once at the checkpoint and hands the summary to this and later turns", async () => {
    const { agent } = await clients.agents.createAgent({
      agent: { name: "summariser", backend: "harness", definition: definition("summariser") },
    });
    const agentId = agent?.id as string;
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-final.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const first = await turn("", agentId, longQuestion(1));
    sessionId = first.sessionId;
    await turn(sessionId, agentId, longQuestion(2));
    // Under the budget: two turn calls, no summarising call.
    expect(server.requests).toHaveLength(2);

    const before = server.requests.length;
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-context-summary.http"),
      fixture("openai/chat-weather-final.http"),
    );
    third = await turn(sessionId, agentId, longQuestion(3));
    expect(server.requests.length).toBe(before + 2);
    // The summarising call: the instruction as system prompt, no tools, turn 1 as text.
    const asked = bodyOf(before);
    expect(asked.tools).toBeUndefined();
    expect(asked.messages[0]).toMatchObject({ role: "system", content: SUMMARY_INSTRUCTION });
    expect(contentOf(asked.messages[1])).toContain("user: question 1: what's the weather?");
    expect(contentOf(asked.messages[1])).not.toContain("question 2");
    // The turn itself got [system, summary, turn 2, input 3].
    const given = bodyOf(before + 1).messages.map(contentOf);
    expect(given.some((c) => c.includes("written by the agent's model"))).toBe(true);
    expect(given.some((c) => c.includes("it was 18°C and sunny. No open questions."))).toBe(true);
    expect(given.some((c) => c.startsWith("question 1"))).toBe(false);
    expect(given.some((c) => c.startsWith("question 2"))).toBe(true);

    const [compacted] = await compactedCount(sessionId, 1);
    expect(compacted?.taskId).toBe(third.id);
    expect(dataOf(compacted)).toMatchObject({
      strategy: "model",
      requested_strategy: "model",
      summary_reused: false,
      summarized_turns: 1,
      summary: expect.stringContaining("No open questions."),
    });

    // A short fourth turn stays under the checkpoint: the stored summary, no new summarising call.
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-final.http"));
    const fourthTask = await turn(sessionId, agentId, "thanks");
    expect(server.requests.length).toBe(before + 3);
    const fourth = bodyOf(before + 2).messages.map(contentOf);
    expect(fourth.some((c) => c.includes("No open questions."))).toBe(true);
    // The log has the fourth turn's reply (relayed after any compaction event of it): still one.
    await eventually(
      async () => {
        const { events } = await clients.events.listEvents({ sessionId, limit: 1000 });
        return events.some((e) => e.taskId === fourthTask.id && e.kind === "agent.message");
      },
      { timeoutMs: 30_000, what: "the fourth turn's reply in the log" },
    );
    expect(await compactedEvents(sessionId)).toHaveLength(1);
    expect(server.pending()).toEqual({});
  }, 90_000);

  it("replays the compacted turn with the recorded summary, never calling the provider", async () => {
    const before = server.requests.length;
    const { task, session } = await clients.tasks.replayTask({ taskId: third.id });
    const done = await settle(task?.id as string);
    expect(done.status, done.failure?.message).toBe(TaskStatus.COMPLETED);
    // Any call would have reached the (still listening) server.
    expect(server.requests.length).toBe(before);
    const [compacted] = await compactedCount(session?.id as string, 1);
    expect(compacted?.taskId).toBe(done.id);
    const [original] = await compactedCount(sessionId, 1);
    expect(dataOf(compacted)).toMatchObject({
      strategy: "model",
      summary_reused: true,
      summary: dataOf(original).summary,
    });
  }, 60_000);

  it("keeps the deterministic summary when summarising fails, and the turn completes", async () => {
    const { agent } = await clients.agents.createAgent({
      agent: { name: "unlucky", backend: "harness", definition: definition("unlucky") },
    });
    const agentId = agent?.id as string;
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-final.http"),
      fixture("openai/chat-weather-final.http"),
      fixture("openai/error-400.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const first = await turn("", agentId, longQuestion(1));
    await turn(first.sessionId, agentId, longQuestion(2));
    const compactedTurn = await turn(first.sessionId, agentId, longQuestion(3));
    const [compacted] = await compactedCount(first.sessionId, 1);
    expect(compacted?.taskId).toBe(compactedTurn.id);
    expect(dataOf(compacted)).toMatchObject({
      strategy: "first_line",
      requested_strategy: "model",
      summary_reused: false,
      fallback_reason: expect.any(String),
      summary: expect.stringContaining("1. user: question 1: what's the weather?"),
    });
    expect(server.pending()).toEqual({});
  }, 90_000);
});
