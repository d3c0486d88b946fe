/**
 * The tool-run ledger on a real PostgreSQL: one claimant wins across
 * connections, and two harness workers sharing the database run an approved
 * call once between them; a call whose run never finished is not run again.
 * Clarification answers (`ask_user`) go through the same ledger: two workers
 * resuming one question with different answers agree on the first, and an
 * answer whose recording a dead worker left unfinished is taken over (nothing
 * ran behind it).
 */
import { createDatabase, type Database } from "@trellis/storage";
import { createTestDatabase, type TestDatabase } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createHarnessAdapter,
  type ExecutionResult,
  PostgresToolRunLedger,
} from "../../src/index.js";
import { createTools, recordedProviders, turnRequest } from "../../src/testing/harness-agents.js";
import {
  ANTHROPIC_MESSAGES,
  fixture,
  OPENAI_CHAT,
  type RecordedServer,
  startRecordedServer,
} from "../../src/testing/recorded-server.js";
import { askingAnthropicAgent } from "./support/fixture.js";

let testDb: TestDatabase;
let first: Database;
let second: Database;
let server: RecordedServer;

beforeAll(async () => {
  testDb = await createTestDatabase("harness_ledger");
  first = await createDatabase({ kind: "postgres", url: testDb.url });
  second = await createDatabase({ kind: "postgres", url: testDb.url });
  server = await startRecordedServer();
});

afterAll(async () => {
  await server?.close();
  await first?.close();
  await second?.close();
  await testDb?.drop();
});

const agent = {
  provider: "openai",
  model: "gpt-4o-mini",
  tools: ["send_email"],
  stream: false,
};

describe("PostgresToolRunLedger", () => {
  it("gives a key to exactly one of many concurrent claimants, then serves the outcome", async () => {
    const a = await PostgresToolRunLedger.open(first, { schema: "harness_claims" });
    const b = await PostgresToolRunLedger.open(second, { schema: "harness_claims" });
    const claims = await Promise.all(
      Array.from({ length: 8 }, (_, i) => (i % 2 === 0 ? a : b).claim("task_1:call_1")),
    );
    expect(claims.filter((c) => c.state === "acquired")).toHaveLength(1);
    expect(claims.filter((c) => c.state === "running")).toHaveLength(7);
    await a.finish("task_1:call_1", { status: "ok", output: "sent" });
    expect(await b.claim("task_1:call_1")).toEqual({
      state: "done",
      outcome: { status: "ok", output: "sent" },
    });
    // A second finish (a confused duplicate) never rewrites the recorded outcome.
    await b.finish("task_1:call_1", { status: "error", output: "boom" });
    expect(await a.claim("task_1:call_1")).toMatchObject({ outcome: { output: "sent" } });
  });

  it("runs an approved call once across two workers resuming the same checkpoint", async () => {
    const tools = createTools({ emailDelayMs: 100 });
    const workers = await Promise.all(
      [first, second].map(async (db) =>
        createHarnessAdapter({
          providers: recordedProviders(server.url),
          tools: tools.tools,
          ledger: await PostgresToolRunLedger.open(db, { schema: "harness_workers" }),
        }),
      ),
    );
    const [w1, w2] = workers as [(typeof workers)[0], (typeof workers)[0]];
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-email-tool-call.http"));
    const taskId = "task_shared_checkpoint";
    const waiting = await w1.execute(turnRequest(agent, "Email Bob", { taskId }).request);
    if (waiting.status !== "suspended") throw new Error(`not suspended: ${waiting.status}`);
    const resume = { checkpoint: waiting.checkpoint, payload: { approved: true } };
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-email-sent.http"),
      fixture("openai/chat-email-sent.http"),
    );
    const results: ExecutionResult[] = await Promise.all([
      w1.execute(turnRequest(agent, "Email Bob", { taskId, resume }).request),
      w2.execute(turnRequest(agent, "Email Bob", { taskId, resume }).request),
    ]);
    expect(results.map((r) => r.status)).toEqual(["completed", "completed"]);
    expect(tools.runs.send_email).toHaveLength(1);
    expect(server.pending()).toEqual({});
  });

  it("fails with tool_outcome_unknown, never a second run, when a claimed run never finished", async () => {
    const tools = createTools();
    const ledger = await PostgresToolRunLedger.open(first, { schema: "harness_crash" });
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      tools: tools.tools,
      ledger,
      inFlightWaitMs: 200,
    });
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-email-tool-call.http"));
    const taskId = "task_crashed_worker";
    const waiting = await adapter.execute(turnRequest(agent, "Email Bob", { taskId }).request);
    if (waiting.status !== "suspended") throw new Error(`not suspended: ${waiting.status}`);
    // A worker claimed the call and died before recording its outcome.
    expect(await ledger.claim(`${taskId}:call_Em4iL5sEnD6bOb7x8Y9z0AbC`)).toEqual({
      state: "acquired",
    });
    const result = await adapter.execute(
      turnRequest(agent, "Email Bob", {
        taskId,
        resume: { checkpoint: waiting.checkpoint, payload: { approved: true } },
      }).request,
    );
    expect(result).toMatchObject({
      status: "failed",
      category: "tool_outcome_unknown",
      retryable: false,
    });
    expect(tools.runs.send_email).toEqual([]);
  });
});

describe("PostgresToolRunLedger and ask_user", () => {
  const asker = askingAnthropicAgent();
  const NOTE_CALL = "toolu_01AsKuSeRnOtE4y5z6a7b8c9";

  async function ask(adapter: ReturnType<typeof createHarnessAdapter>, taskId: string) {
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-ask-user-tool-use.http"));
    const waiting = await adapter.execute(turnRequest(asker, "Draft a note", { taskId }).request);
    if (waiting.status !== "suspended") throw new Error(`not suspended: ${waiting.status}`);
    return waiting;
  }

  const answerOf = (result: ExecutionResult) => {
    if (result.status !== "completed") throw new Error(`not completed: ${JSON.stringify(result)}`);
    return result.messages[0]?.metadata?.[`tool:${NOTE_CALL}`];
  };

  it("gives two workers resuming one question with different answers the same, first answer", async () => {
    const workers = await Promise.all(
      [first, second].map(async (db) =>
        createHarnessAdapter({
          providers: recordedProviders(server.url),
          ledger: await PostgresToolRunLedger.open(db, { schema: "harness_answers" }),
        }),
      ),
    );
    const [w1, w2] = workers as [(typeof workers)[0], (typeof workers)[0]];
    const taskId = "task_shared_question";
    const waiting = await ask(w1, taskId);
    server.enqueue(
      ANTHROPIC_MESSAGES,
      fixture("anthropic/messages-ask-user-final.http"),
      fixture("anthropic/messages-ask-user-final.http"),
    );
    const [a, b] = await Promise.all(
      [w1, w2].map((w, i) =>
        w.execute(
          turnRequest(asker, "Draft a note", {
            taskId,
            resume: { checkpoint: waiting.checkpoint, payload: { answer: `answer ${i + 1}` } },
          }).request,
        ),
      ),
    );
    const recorded = [answerOf(a as ExecutionResult), answerOf(b as ExecutionResult)];
    const outputs = recorded.map((r) => (r as { output: string }).output);
    expect(outputs[0]).toBe(outputs[1]);
    expect(["answer 1", "answer 2"]).toContain(outputs[0]);
    // Exactly one of them recorded it; the other was handed the recorded answer.
    expect(recorded.filter((r) => (r as { recorded?: boolean }).recorded === true)).toHaveLength(1);
    expect(server.pending()).toEqual({});
  });

  it("takes over an answer a dead worker claimed but never recorded", async () => {
    const ledger = await PostgresToolRunLedger.open(first, { schema: "harness_answer_crash" });
    const adapter = createHarnessAdapter({
      providers: recordedProviders(server.url),
      ledger,
      inFlightWaitMs: 200,
    });
    const taskId = "task_crashed_answer";
    const waiting = await ask(adapter, taskId);
    expect(await ledger.claim(`${taskId}:${NOTE_CALL}`)).toEqual({ state: "acquired" });
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-ask-user-final.http"));
    const result = await adapter.execute(
      turnRequest(asker, "Draft a note", {
        taskId,
        resume: { checkpoint: waiting.checkpoint, payload: { answer: "The tap leaks." } },
      }).request,
    );
    expect(answerOf(result)).toMatchObject({ output: "The tap leaks." });
    // Recorded now: a later resume gets this answer.
    expect(await ledger.claim(`${taskId}:${NOTE_CALL}`)).toEqual({
      state: "done",
      outcome: { status: "ok", output: "The tap leaks." },
    });
    expect(server.pending()).toEqual({});
  });
});
