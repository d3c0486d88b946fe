// The `model` compaction strategy around the compactor: the agent's backend is
// asked once per checkpoint (one tool-less, one-step request), the summary is
// stored and reused by later turns, a failed call falls back to the
// deterministic summary (and says so) without failing the turn, a replay never
// calls the model, and scripted agents keep the deterministic summary.
import { create, type JsonObject } from "@bufbuild/protobuf";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import { AgentSchema, TaskSchema } from "@trellis/contracts/tasks";
import type { AgentExecutor, ExecutionRequest, ExecutionResult } from "@trellis/execution";
import { createLogger } from "@trellis/runtime";
import { describe, expect, it } from "vitest";
import {
  ContextCompactor,
  type ContextItem,
  type ContextSummaryStore,
  loadCompactionConfig,
  type StoredSummary,
  SUMMARY_INSTRUCTION,
} from "../src/compaction/index.js";
import type { Claim } from "../src/store/task-store.js";

function msg(role: Role, value: string): Message {
  return create(MessageSchema, {
    role,
    parts: [{ kind: { case: "text", value: { text: value } } }],
  });
}

/** `n` turns of ~110 tokens each side. */
function transcript(n: number): Message[] {
  const out: Message[] = [];
  for (let i = 1; i <= n; i++) {
    out.push(msg(Role.USER, `question ${i}\n${"q".repeat(400)}`));
    out.push(msg(Role.ASSISTANT, `answer ${i}\n${"a".repeat(400)}`));
  }
  return out;
}

const textOf = (m: Message | undefined) =>
  m?.parts.map((p) => (p.kind.case === "text" ? p.kind.value.text : "")).join("") ?? "";

function claim(
  backend: string,
  options: { parentTaskId?: string; context?: JsonObject; taskId?: string } = {},
): Claim {
  const definition: JsonObject = {
    provider: "openai",
    model: "gpt-4o-mini",
    system: "You are the agent.",
    tools: ["get_weather"],
    require_approval: ["get_weather"],
    budgets: { max_steps: 8 },
    context: { budget_tokens: 600, keep_recent_turns: 1, ...options.context },
  };
  return {
    task: create(TaskSchema, {
      id: options.taskId ?? "task_4",
      sessionId: "ses_1",
      workspaceId: "ws_1",
      parentTaskId: options.parentTaskId ?? "",
      input: msg(Role.USER, `question 4\n${"q".repeat(400)}`),
    }),
    agent: create(AgentSchema, { id: "agt_1", backend, definition, tools: ["get_weather"] }),
    safeToRetry: true,
    inputPosition: 6n,
    transcriptEpoch: 0n,
    leaseOwner: "replica",
  };
}

/** An executor answering summarising calls with `answer`, counting them. */
function fakeExecutor(answer: (request: ExecutionRequest) => Promise<ExecutionResult>) {
  const requests: ExecutionRequest[] = [];
  const executor: AgentExecutor = {
    backends: () => [],
    validateDefinition: () => {},
    execute: (request) => {
      requests.push(request);
      return answer(request);
    },
  };
  return { executor, requests };
}

const replying = (text: string) => async (): Promise<ExecutionResult> => ({
  status: "completed",
  messages: [msg(Role.ASSISTANT, text)],
});

class MemorySummaries implements ContextSummaryStore {
  readonly rows = new Map<string, StoredSummary>();
  async get(digest: string) {
    return this.rows.get(digest);
  }
  async put(summary: StoredSummary) {
    if (!this.rows.has(summary.digest)) this.rows.set(summary.digest, summary);
    return this.rows.get(summary.digest)!;
  }
}

const logger = createLogger({ service: "test", level: "error" });
const config = loadCompactionConfig({});

/** A compactor over `executor` for a live task (not a replay). */
function liveCompactor(
  executor: AgentExecutor,
  summaries: MemorySummaries = new MemorySummaries(),
): ContextCompactor {
  return new ContextCompactor(config, logger, { executor, summaries, isReplay: async () => false });
}

async function prepare(
  compactor: ContextCompactor,
  c: Claim,
  history = transcript(3),
  signal?: AbortSignal,
) {
  const items: ContextItem[] = [];
  const given = await compactor.prepare(
    c,
    history,
    async (i) => {
      items.push(...i);
    },
    signal,
  );
  const compacted = items.find((i) => i.kind === "context.compacted");
  return { given, compacted: compacted?.data };
}

describe("model compaction strategy", () => {
  it("asks the agent's backend once, tool-less and one step, and reuses the stored summary", async () => {
    const { executor, requests } = fakeExecutor(replying("The user asked 3 questions."));
    const summaries = new MemorySummaries();
    const compactor = liveCompactor(executor, summaries);

    const first = await prepare(compactor, claim("harness"));
    expect(requests).toHaveLength(1);
    const request = requests[0]!;
    expect(request.agent.definition).toMatchObject({
      provider: "openai",
      model: "gpt-4o-mini",
      system: SUMMARY_INSTRUCTION,
      tools: [],
      ask_user: false,
      stream: false,
      budgets: { max_steps: 1 },
    });
    expect(request.agent.definition.require_approval).toBeUndefined();
    expect(request.agent.tools).toEqual([]);
    expect(request.toolDescriptors).toBeUndefined();
    expect(request.history).toEqual([]);
    // Turns 1–2 are summarised (turn 3 is kept); the text says what they were.
    const asked = textOf(request.input);
    expect(asked).toContain("Turn 1:\nuser: question 1");
    expect(asked).toContain("assistant: answer 2");
    expect(asked).not.toContain("question 3");

    expect(first.given.map((m) => textOf(m).split("\n")[0])).toEqual([
      expect.stringMatching(/^Summary of the 2 earlier turns .*written by the agent's model:$/),
      "question 3",
      "answer 3",
    ]);
    expect(textOf(first.given[0])).toContain("The user asked 3 questions.");
    expect(first.compacted).toMatchObject({
      strategy: "model",
      requested_strategy: "model",
      summary_reused: false,
      summary: textOf(first.given[0]),
      summarized_turns: 2,
    });
    expect(first.compacted?.fallback_reason).toBeUndefined();
    expect(summaries.rows.size).toBe(1);

    // A later turn at the same checkpoint (any replica sharing the store) reads it back.
    const again = await prepare(compactor, claim("harness", { taskId: "task_4b" }));
    expect(requests).toHaveLength(1);
    expect(textOf(again.given[0])).toBe(textOf(first.given[0]));
    expect(again.compacted).toMatchObject({ strategy: "model", summary_reused: true });
  });

  it("falls back to the deterministic summary when the call fails, records why, and keeps it", async () => {
    for (const answer of [
      async (): Promise<ExecutionResult> => ({
        status: "failed",
        messages: [],
        category: "provider_error",
        message: "the provider answered 500",
        retryable: true,
      }),
      async (): Promise<ExecutionResult> => {
        throw new Error("connection refused");
      },
    ]) {
      const { executor, requests } = fakeExecutor(answer);
      const compactor = liveCompactor(executor);
      const first = await prepare(compactor, claim("harness"));
      expect(textOf(first.given[0])).toMatch(/^Summary of the 2 earlier turns .*First line/);
      expect(first.compacted).toMatchObject({
        strategy: "first_line",
        requested_strategy: "model",
        summary_reused: false,
        fallback_reason: expect.stringMatching(/provider answered 500|connection refused/),
      });
      // The fallback is the checkpoint's summary from now on: no call every turn.
      const again = await prepare(compactor, claim("harness"));
      expect(requests).toHaveLength(1);
      expect(textOf(again.given[0])).toBe(textOf(first.given[0]));
    }
  });

  it("gives up on a model that does not answer within the summary timeout", async () => {
    const { executor } = fakeExecutor(
      (request) =>
        new Promise((_, reject) =>
          request.signal.addEventListener("abort", () => reject(new Error("aborted")), {
            once: true,
          }),
        ),
    );
    const compactor = new ContextCompactor(
      loadCompactionConfig({ TRELLIS_CONTEXT_SUMMARY_TIMEOUT: "200ms" }),
      logger,
      { executor, summaries: new MemorySummaries(), isReplay: async () => false },
    );
    const { compacted } = await prepare(compactor, claim("harness"));
    expect(compacted).toMatchObject({
      strategy: "first_line",
      fallback_reason: "the model did not summarise within 200 ms",
    });
  });

  it("stores nothing when the turn is canceled while summarising", async () => {
    const abort = new AbortController();
    const { executor } = fakeExecutor(async (request) => {
      abort.abort(new Error("canceled"));
      throw request.signal.reason;
    });
    const summaries = new MemorySummaries();
    const compactor = liveCompactor(executor, summaries);
    const { given } = await prepare(compactor, claim("harness"), transcript(3), abort.signal);
    expect(given).toHaveLength(3);
    expect(summaries.rows.size).toBe(0);
  });

  it("never calls the model in a replay: the recorded summary, else the deterministic one", async () => {
    const source = fakeExecutor(replying("Recorded summary."));
    const summaries = new MemorySummaries();
    await prepare(liveCompactor(source.executor, summaries), claim("harness"));
    const live = fakeExecutor(replying("A live answer."));
    const replays: string[] = [];
    const replaying = new ContextCompactor(config, logger, {
      executor: live.executor,
      summaries,
      isReplay: async (id) => {
        replays.push(id);
        return true;
      },
    });
    const replayed = await prepare(
      replaying,
      claim("harness", { parentTaskId: "task_4", taskId: "task_r" }),
    );
    expect(textOf(replayed.given[0])).toContain("Recorded summary.");
    expect(replayed.compacted).toMatchObject({ strategy: "model", summary_reused: true });

    const empty = new ContextCompactor(config, logger, {
      executor: live.executor,
      summaries: new MemorySummaries(),
      isReplay: async (id) => {
        replays.push(id);
        return true;
      },
    });
    const unrecorded = await prepare(
      empty,
      claim("harness", { parentTaskId: "task_4", taskId: "task_r2" }),
    );
    expect(unrecorded.compacted).toMatchObject({
      strategy: "first_line",
      fallback_reason: expect.stringMatching(/^replay:/),
    });
    expect(live.requests).toHaveLength(0);
    expect(replays).toEqual(["task_r2"]);
  });

  it("keeps the deterministic summary for scripted agents and for agents that ask for it", async () => {
    const { executor, requests } = fakeExecutor(replying("unused"));
    const compactor = liveCompactor(executor);
    const scripted = await prepare(compactor, claim("scripted"));
    const told = await prepare(
      compactor,
      claim("harness", { context: { strategy: "deterministic" } }),
    );
    expect(requests).toHaveLength(0);
    for (const { compacted } of [scripted, told]) {
      expect(compacted).toMatchObject({ strategy: "first_line" });
      expect(compacted?.requested_strategy).toBeUndefined();
    }
  });
});
