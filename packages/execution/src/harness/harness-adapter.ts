/**
 * The built-in harness (backend "harness"): a tool-loop agent over a model
 * provider.
 *
 * One turn: call the model with the conversation and the agent's tools; run
 * the tool calls it asks for (inputs validated against each tool's schema
 * first; a bad call is answered with an error result, never run); feed the
 * results back; repeat until the model answers without tool calls, or a step
 * or token budget runs out (`budget_exceeded`).
 *
 * A tool that needs approval suspends the turn (INPUT_REQUIRED, signal label
 * `approval:<tool call id>`, metadata describing the pending call). The
 * checkpoint carries the turn so far; resuming with `{"approved": true}` runs
 * the call exactly once — through the {@link ToolRunLedger}, however often
 * the same checkpoint is resumed — and `{"approved": false, "reason"?}` feeds
 * a denied result back to the model instead.
 *
 * An agent with `"ask_user": true` also gets the built-in clarification tool
 * (`clarification.ts`): the model's `ask_user({question})` suspends the turn
 * (reason `clarification`, signal label `clarification:<tool call id>`, the
 * question in the metadata), and resuming with `{"answer": "…"}` feeds the
 * answer back as that call's result. The answer is recorded in the ledger
 * under the call, so a checkpoint resumed twice gets the first answer again.
 *
 * Recording for replay (Harn replay keys): every assistant message carries
 * the model call's record in its metadata under `llm:<call_id>` (call ids are
 * `main:1`, `main:2`, … per task, counted across suspensions), with the
 * provider's verbatim response; every tool message carries the tool's record
 * under `tool:<tool_call_id>` (with `output_sha256`, the hash of the result
 * the model got), and the call's clock and secret reads through its context
 * under `time:<label>` / `secret:<name>` (a secret only hashed; see
 * {@link HarnessEnvironment}). All travel with the messages into the
 * transcript and the `message` execution events.
 */
import { clone, type JsonObject, type JsonValue, toJson } from "@bufbuild/protobuf";
import { type Value, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  defineAdapter,
  EXECUTION_SCHEMA_VERSION,
  type ExecutionAdapter,
  type ExecutionCapabilities,
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionResult,
} from "@trellis/adapter-sdk";
import { type Message, MessageSchema, Role } from "@trellis/contracts/core";
import { chatToMessage } from "@trellis/messages";
import { isRecord, sleep, TrellisError, withSpan } from "@trellis/runtime";
import {
  decodeCheckpoint,
  encodeCheckpoint,
  type Suspension,
  type ToolCallJob,
  type TurnState,
} from "./checkpoint.js";
import {
  ASK_USER,
  ASK_USER_TOOL,
  answerOf,
  clarificationMetadata,
  questionOf,
} from "./clarification.js";
import { CallReads, type HarnessEnvironment, loadVaultSecrets, textSha256 } from "./environment.js";
import {
  type HarnessDefinition,
  HarnessDefinitionError,
  parseHarnessDefinition,
} from "./harness-definition.js";
import { type McpPolicy, resolveMcpPolicy } from "./mcp/definition.js";
import { isMcpHarnessTool, runWithTurnMcp } from "./mcp/turn-tools.js";
import { withMemoryTools } from "./memory-tools.js";
import type { ModelProvider, ModelProviderFactory, ModelResponse, ModelTool } from "./provider.js";
import { isProviderError } from "./provider-error.js";
import {
  InMemoryToolRunLedger,
  type ToolRunLedger,
  type ToolRunOutcome,
} from "./tool-run-ledger.js";
import { type HarnessTool, resultText, ToolRegistry } from "./tools.js";
import { storableToolOutcome } from "./unstorable-text.js";

/** Backend id of the built-in harness. */
export const HARNESS_BACKEND = "harness";

/**
 * `name` of the system message that stands for summarised older turns in a
 * compacted history (the tasks service's context compaction): the one
 * system-role history message the harness hands the model.
 */
export const CONTEXT_SUMMARY_NAME = "context_summary";

/**
 * What the harness honestly does (BYOH §1.4): it runs the tool loop itself,
 * with structured tool calls; approval-gated tools and the model's clarifying
 * questions (`ask_user`) are real in-band pauses with a structured checkpoint; model answers stream natively; every model
 * call and tool result is recorded. Attachments: images (URL or inline) go to
 * the model; references to files or artifacts do not (negotiation blocks them).
 */
export const HARNESS_CAPABILITIES: ExecutionCapabilities = {
  schemaVersion: EXECUTION_SCHEMA_VERSION,
  toolUse: "native-iterative",
  structuredToolCalls: true,
  continuationSupport: "structured",
  approvalInterrupts: "native",
  traceDepth: "detailed",
  attachments: true,
  streaming: "native",
  maxContextStrategy: "large",
  notes: [
    "tool loop over OpenAI Chat Completions or the Anthropic Messages API",
    "attachments: inline or URL images only; file, artifact and image references are refused",
  ],
};

/** Input parts the providers cannot be given (references the harness does not resolve). */
const UNRESOLVED_PARTS = new Set(["imageRef", "fileRef", "artifactRef"]);

/** Options of {@link createHarnessAdapter}. */
export interface HarnessAdapterOptions {
  /** Providers by name (see `harnessProvidersFromEnv`). */
  providers: Readonly<Record<string, ModelProviderFactory>>;
  /** The tools agents may use. */
  tools?: readonly HarnessTool[];
  /** Where tool runs are claimed (default: in memory, exact within this process). */
  ledger?: ToolRunLedger;
  /**
   * How long a resume waits for another run of the same tool call to finish
   * before giving up with `tool_outcome_unknown` (default 30 000 ms).
   */
  inFlightWaitMs?: number;
  /** The clock and secrets tools read (default: the wall clock, no secrets). */
  environment?: HarnessEnvironment;
  /**
   * What agents may do with MCP servers (`mcp_servers`; see
   * `mcp/definition.ts` and `harnessMcpPolicyFromEnv`). Default: HTTP servers
   * on public https addresses only, no stdio servers.
   */
  mcp?: McpPolicy;
}

/** `{"approved": bool, "reason"?: string}`, or undefined when the payload is not one. */
function approvalOf(payload: JsonValue): { approved: boolean; reason?: string } | undefined {
  if (!isRecord(payload) || typeof payload.approved !== "boolean") return undefined;
  return {
    approved: payload.approved,
    ...(typeof payload.reason === "string" && payload.reason !== ""
      ? { reason: payload.reason }
      : {}),
  };
}

function withoutMetadata(message: Message): Message {
  const copy = clone(MessageSchema, message);
  copy.metadata = undefined;
  return copy;
}

/**
 * A tool message with its record (`tool:<id>`, plus `output_sha256`: the hash
 * of the content the model got) and the clock / secret reads of the call.
 */
function toolMessage(
  job: ToolCallJob,
  content: string,
  record: JsonObject,
  reads: JsonObject = {},
): Message {
  const message = chatToMessage({ role: "tool", tool_call_id: job.id, content });
  message.metadata = {
    [`tool:${job.id}`]: { ...record, output_sha256: textSha256(content) },
    ...reads,
  };
  return message;
}

function argumentsOf(call: Message["toolCalls"][number]): JsonValue {
  return call.arguments ? toJson(ValueSchema, call.arguments as Value) : null;
}

/** Raised inside a turn to end it with a result (failure, suspension, cancel). */
class TurnEnd extends Error {
  constructor(readonly result: ExecutionResult) {
    super(result.status);
  }
}

/** One turn of one agent. */
class HarnessTurn {
  /** Messages made by this run (returned in the result). */
  readonly #made: Message[] = [];

  constructor(
    private readonly request: ExecutionRequest,
    private readonly definition: HarnessDefinition,
    private readonly provider: ModelProvider,
    private readonly tools: ReadonlyMap<string, HarnessTool>,
    private readonly registry: ToolRegistry,
    private readonly ledger: ToolRunLedger,
    private readonly inFlightWaitMs: number,
    private readonly state: TurnState,
    private readonly environment: HarnessEnvironment,
  ) {}

  #emit(event: ExecutionEvent) {
    this.request.onEvent?.(event);
  }

  #add(message: Message) {
    this.#made.push(message);
    this.state.turn.push(withoutMetadata(message));
    this.#emit({ kind: "message", message });
  }

  /** Tokens this run's model calls used (the result's usage). */
  readonly #usage = { inputTokens: 0, outputTokens: 0 };
  /** The turn's vault secrets, once a tool call needed them. */
  #vault: ReturnType<typeof loadVaultSecrets> | undefined;

  #fail(category: string, message: string, retryable = false): TurnEnd {
    return new TurnEnd({
      status: "failed",
      messages: this.#made,
      category,
      message,
      retryable,
      usage: { ...this.#usage },
    });
  }

  #checkAborted() {
    if (this.request.signal.aborted) {
      throw new TurnEnd({ status: "cancelled", messages: this.#made });
    }
  }

  /** Runs the turn from where the state stands. */
  async run(resume?: Suspension & { payload: JsonValue }): Promise<ExecutionResult> {
    try {
      if (resume?.awaiting === "clarification") await this.#answer(resume.pending, resume.payload);
      else if (resume) await this.#resume(resume.pending, resume.payload);
      for (;;) {
        while (this.state.queue.length > 0) {
          const job = this.state.queue.shift() as ToolCallJob;
          await this.#handle(job);
        }
        const answer = await this.#callModel();
        if (answer === "final") {
          return { status: "completed", messages: this.#made, usage: { ...this.#usage } };
        }
      }
    } catch (error) {
      if (error instanceof TurnEnd) return error.result;
      throw error;
    }
  }

  async #resume(pending: ToolCallJob, payload: JsonValue) {
    const decision = approvalOf(payload);
    if (!decision) {
      throw this.#fail(
        "suspension_resume_payload_invalid",
        `the approval of tool call ${pending.id} needs a payload {"approved": true|false, "reason"?: string}`,
      );
    }
    const tool = this.tools.get(pending.name);
    if (!tool) {
      throw this.#fail("agent_definition_invalid", `the agent no longer has tool ${pending.name}`);
    }
    if (!decision.approved) {
      const reason = decision.reason ? `: ${decision.reason}` : "";
      this.#emit({
        kind: "tool_finished",
        toolCallId: pending.id,
        name: pending.name,
        status: "denied",
      });
      this.#add(
        toolMessage(pending, `The user denied this call to ${pending.name}${reason}.`, {
          kind: "tool_result",
          tool_call_id: pending.id,
          name: pending.name,
          status: "denied",
          approval: { approved: false, ...(decision.reason ? { reason: decision.reason } : {}) },
        }),
      );
      return;
    }
    await this.#runTool(pending, tool, { approved: true });
  }

  /**
   * Resumes a clarification: the answer becomes the `ask_user` call's result.
   * The first answer is recorded in the ledger; resuming the same checkpoint
   * again feeds that recorded answer back, whatever the later payload says.
   */
  async #answer(pending: ToolCallJob, payload: JsonValue) {
    if (!this.definition.askUser) {
      throw this.#fail(
        "agent_definition_invalid",
        `the agent no longer enables ${ASK_USER}; the answer to tool call ${pending.id} cannot be given`,
      );
    }
    const given = answerOf(payload);
    if ("problem" in given) {
      throw this.#fail(
        "suspension_resume_payload_invalid",
        `the answer to the question of tool call ${pending.id} needs a payload {"answer": "<text>"}: ${given.problem}`,
      );
    }
    const key = `${this.request.taskId}:${pending.id}`;
    // Nothing runs behind a clarification: a claim its resumer never finished can be taken over.
    const claimed = await this.#claim(key, "take");
    let answer = given.answer;
    if (claimed.state === "done") {
      answer = claimed.outcome.output;
    } else {
      try {
        await this.ledger.finish(key, { status: "ok", output: answer });
      } catch (error) {
        throw this.#fail(
          "tool_ledger_unavailable",
          `cannot record the answer to tool call ${key}: ${String(error)}`,
          true,
        );
      }
    }
    const asked = questionOf(pending.arguments);
    this.#emit({ kind: "tool_finished", toolCallId: pending.id, name: ASK_USER, status: "ok" });
    this.#add(
      toolMessage(pending, answer, {
        kind: "tool_result",
        tool_call_id: pending.id,
        name: ASK_USER,
        status: "ok",
        output: answer,
        clarification: { question: "question" in asked ? asked.question : "", answer },
        ...(claimed.state === "done" ? { recorded: true } : {}),
      }),
    );
  }

  /** Answers a malformed call with an error result (the model may correct itself); nothing runs. */
  #reject(job: ToolCallJob, problems: readonly { path: string; message: string }[]) {
    const text = problems.map((p) => `${p.path || "input"}: ${p.message}`).join("; ");
    this.#emit({ kind: "tool_finished", toolCallId: job.id, name: job.name, status: "error" });
    this.#add(
      toolMessage(job, `Error: the call was not run. ${text}`, {
        kind: "tool_result",
        tool_call_id: job.id,
        name: job.name,
        status: "rejected",
        problems: problems.map((p) => ({ path: p.path, message: p.message })),
      }),
    );
  }

  /** Handles one tool call: answer a bad one, ask the user, suspend for approval, or run it. */
  async #handle(job: ToolCallJob) {
    this.#checkAborted();
    if (job.name === ASK_USER && this.definition.askUser) {
      const asked = questionOf(job.arguments);
      if ("problems" in asked) return this.#reject(job, asked.problems);
      throw new TurnEnd({
        status: "suspended",
        messages: this.#made,
        usage: { ...this.#usage },
        signalLabel: `clarification:${job.id}`,
        kind: "input",
        reason: "clarification",
        metadata: clarificationMetadata(asked.question, job.id, job.callId),
        checkpoint: encodeCheckpoint(this.state, job, "clarification"),
      });
    }
    const tool = this.tools.get(job.name);
    const problems = !tool
      ? [{ path: "", message: `no tool named ${job.name} is available` }]
      : isMcpHarnessTool(tool)
        ? tool.mcp.check(job.arguments)
        : this.registry.check(job.name, job.arguments);
    if (!tool || problems.length > 0) return this.#reject(job, problems);
    const descriptor = this.request.toolDescriptors?.find((d) => d.name === job.name);
    // Approval can be asked for by the tool, the agent, or the caller's policy; none can waive it.
    if (
      tool.requiresApproval ||
      this.definition.requireApproval.includes(job.name) ||
      descriptor?.requiresApproval
    ) {
      throw new TurnEnd({
        status: "suspended",
        messages: this.#made,
        usage: { ...this.#usage },
        signalLabel: `approval:${job.id}`,
        kind: "input",
        reason: "approval",
        approvalRequest: {
          reason: `${job.name} needs approval before it runs`,
          approvalKey: `approval:${job.id}`,
        },
        metadata: {
          kind: "tool_approval",
          tool_call_id: job.id,
          tool_name: job.name,
          tool_description: tool.description,
          ...(isMcpHarnessTool(tool) ? { mcp_server: tool.mcp.server } : {}),
          arguments: job.arguments,
          call_id: job.callId,
          approve: { approved: true },
          deny: { approved: false, reason: "" },
        },
        checkpoint: encodeCheckpoint(this.state, job, "approval"),
      });
    }
    await this.#runTool(job, tool);
  }

  /** Runs a tool call at most once per task (the ledger), recording its result. */
  async #runTool(job: ToolCallJob, tool: HarnessTool, approval?: JsonObject) {
    const key = `${this.request.taskId}:${job.id}`;
    const call = { taskId: this.request.taskId, toolCallId: job.id };
    const { workspaceId, agent } = this.request;
    // Loaded at the turn's first tool call and kept for the rest of the turn
    // (the access policy depends only on the workspace and the agent); a
    // failed load is tried again at the next call.
    this.#vault ??= loadVaultSecrets(
      this.environment,
      { ...call, workspaceId, agentId: agent.id },
      this.request,
    );
    const vault = await this.#vault.catch((error: unknown) => {
      this.#vault = undefined;
      throw this.#fail("vault_unavailable", String((error as Error).message), true);
    });
    const claimed = await this.#claim(key);
    let outcome: ToolRunOutcome;
    let replayed = false;
    /** The call's clock and secret reads, recorded on its tool message. */
    const reads = new CallReads(this.environment, call, vault);
    const mcp = isMcpHarnessTool(tool) ? tool.mcp : undefined;
    if (claimed.state === "done") {
      // This call already ran (the same checkpoint resumed again): its result, not a second run.
      outcome = claimed.outcome;
      replayed = true;
    } else {
      this.#emit({
        kind: "tool_started",
        toolCallId: job.id,
        name: job.name,
        input: job.arguments,
        ...(mcp ? { mcpServer: mcp.server } : {}),
      });
      try {
        const value = await tool.run(job.arguments as JsonObject, {
          taskId: this.request.taskId,
          sessionId: this.request.sessionId,
          workspaceId: this.request.workspaceId,
          toolCallId: job.id,
          signal: this.request.signal,
          now: (label) => reads.now(label),
          secret: (name) => reads.secret(name),
          ...(this.request.memory ? { memory: this.request.memory } : {}),
        });
        outcome = { status: "ok", output: resultText(value) };
      } catch (error) {
        outcome = {
          status: "error",
          output: `Error: ${job.name} failed: ${error instanceof Error ? error.message : String(error)}`,
        };
      }
      outcome = storableToolOutcome(job.name, outcome);
      try {
        await this.ledger.finish(key, outcome);
      } catch (error) {
        throw this.#fail(
          "tool_outcome_unknown",
          `${job.name} ran but its result could not be recorded: ${String(error)}`,
        );
      }
    }
    this.#emit({
      kind: "tool_finished",
      toolCallId: job.id,
      name: job.name,
      status: outcome.status === "ok" ? "ok" : "error",
    });
    this.#add(
      toolMessage(
        job,
        outcome.output,
        {
          kind: "tool_result",
          tool_call_id: job.id,
          name: job.name,
          status: outcome.status,
          output: outcome.output,
          ...(mcp ? { mcp: { server: mcp.server, tool: mcp.tool } } : {}),
          ...(approval ? { approval } : {}),
          ...(replayed ? { recorded: true } : {}),
        },
        reads.records,
      ),
    );
  }

  /** Claims `key`, waiting for another run of it; `take` takes over a claim left unfinished. */
  async #claim(key: string, stale: "fail" | "take" = "fail") {
    const deadline = Date.now() + this.inFlightWaitMs;
    for (;;) {
      let claim: Awaited<ReturnType<ToolRunLedger["claim"]>>;
      try {
        claim = await this.ledger.claim(key);
      } catch (error) {
        // Nothing ran: trying the turn again is safe.
        throw this.#fail(
          "tool_ledger_unavailable",
          `cannot claim tool run ${key}: ${String(error)}`,
          true,
        );
      }
      if (claim.state !== "running") return claim;
      if (Date.now() >= deadline) {
        if (stale === "take") return { state: "acquired" as const };
        throw this.#fail(
          "tool_outcome_unknown",
          `tool call ${key} was started by another run that never recorded its result; not running it twice`,
        );
      }
      await sleep(50, this.request.signal);
      this.#checkAborted();
    }
  }

  /** One model call; queues its tool calls. Returns "final" when the model is done. */
  async #callModel(): Promise<"final" | "tools"> {
    this.#checkAborted();
    const { budgets } = this.definition;
    if (this.state.steps >= budgets.maxSteps) {
      throw this.#fail(
        "budget_exceeded",
        `the turn used its ${budgets.maxSteps} model calls (budgets.max_steps) without a final answer`,
      );
    }
    if (budgets.maxTotalTokens !== undefined && this.state.usage.total >= budgets.maxTotalTokens) {
      throw this.#fail(
        "budget_exceeded",
        `the turn used ${this.state.usage.total} of its ${budgets.maxTotalTokens} tokens (budgets.max_total_tokens) without a final answer`,
      );
    }
    this.state.steps += 1;
    const callId = `main:${this.state.steps}`;
    let response: ModelResponse;
    try {
      // One span per model call, child of the backend run (llm-provider call).
      response = await withSpan(
        "trellis.model.call",
        {
          kind: "client",
          attributes: {
            "gen_ai.provider.name": this.provider.provider,
            "gen_ai.request.model": this.provider.model,
            "trellis.model_call_id": callId,
          },
        },
        () =>
          this.provider.complete({
            messages: this.#conversation(),
            tools: this.#modelTools(),
            ...(this.definition.maxOutputTokens !== undefined
              ? { maxOutputTokens: this.definition.maxOutputTokens }
              : {}),
            ...(this.definition.temperature !== undefined
              ? { temperature: this.definition.temperature }
              : {}),
            stream: this.definition.stream,
            signal: this.request.signal,
            onDelta: (delta) =>
              this.#emit({
                kind: delta.kind === "text" ? "text_delta" : "thinking_delta",
                text: delta.text,
              }),
          }),
      );
    } catch (error) {
      this.#checkAborted();
      if (isProviderError(error)) {
        throw this.#fail(error.category, error.message, error.retryable);
      }
      throw error;
    }
    const { usage } = response;
    const prompt = usage.promptTokens ?? 0;
    const completion = usage.completionTokens ?? 0;
    this.state.usage.prompt += prompt;
    this.state.usage.completion += completion;
    this.state.usage.total += usage.totalTokens ?? prompt + completion;
    this.#usage.inputTokens += prompt;
    this.#usage.outputTokens += completion;

    const message = response.message;
    if (response.finishReason === "error") {
      throw this.#fail(
        "provider_unavailable",
        `${this.provider.provider} reported an error in the middle of its answer (${callId})`,
        true,
      );
    }
    const hasContent = message.parts.some(
      (p) => p.kind.case === "text" && p.kind.value.text !== "",
    );
    if (!hasContent && message.toolCalls.length === 0) {
      throw this.#fail(
        response.finishReason === "content_filter" ? "content_filter" : "provider_invalid_response",
        `${this.provider.provider} returned an empty answer (finish reason ${response.finishReason}, ${callId})`,
      );
    }
    message.metadata = {
      [`llm:${callId}`]: {
        kind: "llm_provider_response",
        call_id: callId,
        provider: this.provider.provider,
        model: response.model,
        streamed: this.definition.stream,
        finish_reason: response.finishReason,
        usage: {
          prompt_tokens: usage.promptTokens,
          completion_tokens: usage.completionTokens,
          total_tokens: usage.totalTokens,
          ...(usage.cachedTokens !== undefined ? { cached_tokens: usage.cachedTokens } : {}),
        },
        response: response.raw,
      },
    };
    this.#add(message);
    this.#emit({
      kind: "step_finished",
      iteration: this.state.steps,
      usage: { inputTokens: prompt, outputTokens: completion },
    });
    if (message.toolCalls.length === 0) return "final";
    this.state.queue = message.toolCalls.map((call) => ({
      id: call.id,
      name: call.name,
      arguments: argumentsOf(call),
      callId,
    }));
    return "tools";
  }

  /** System prompt, the session before this turn, the input, and the turn so far. */
  #conversation(): Message[] {
    const system = this.definition.system
      ? [chatToMessage({ role: "system", content: this.definition.system })]
      : [];
    // System-role messages of the transcript are replies to people (chat error
    // replies), not instructions: the agent's own prompt is the only system text
    // — except a compaction checkpoint the caller put in place of older turns.
    const history = this.request.history.filter(
      (m) => m.role !== Role.SYSTEM || m.name === CONTEXT_SUMMARY_NAME,
    );
    return [...system, ...history, this.request.input, ...this.state.turn];
  }

  #modelTools(): ModelTool[] {
    const tools: ModelTool[] = [...this.tools.values()].map((tool) => ({
      name: tool.name,
      description: tool.description,
      parameters: tool.inputSchema,
    }));
    return this.definition.askUser ? [...tools, ASK_USER_TOOL] : tools;
  }
}

function definitionError(error: HarnessDefinitionError): TrellisError {
  return new TrellisError({
    reason: "agent_definition_invalid",
    message: `harness agent: ${error.message}`,
    param: `agent.definition.${error.path}`,
  });
}

/**
 * Creates the built-in harness adapter. Agents name a provider the adapter
 * was given, a model, and registry tools (see `harness-definition.ts`).
 */
export function createHarnessAdapter(options: HarnessAdapterOptions): ExecutionAdapter {
  const registry = new ToolRegistry(withMemoryTools(options.tools ?? []));
  const providerNames = Object.keys(options.providers);
  const ledger = options.ledger ?? new InMemoryToolRunLedger();
  const inFlightWaitMs = options.inFlightWaitMs ?? 30_000;
  const mcpPolicy = resolveMcpPolicy(options.mcp);
  const cache = new WeakMap<JsonObject, HarnessDefinition>();
  const parse = (document: JsonObject): HarnessDefinition => {
    let definition = cache.get(document);
    if (!definition) {
      definition = parseHarnessDefinition(
        document,
        providerNames,
        (name) => registry.has(name),
        mcpPolicy,
      );
      cache.set(document, definition);
    }
    return definition;
  };
  return defineAdapter({
    backendId: HARNESS_BACKEND,
    capabilities: HARNESS_CAPABILITIES,
    validateDefinition(definition) {
      try {
        parse(definition);
      } catch (error) {
        if (error instanceof HarnessDefinitionError) throw definitionError(error);
        throw error;
      }
    },
    negotiate(request, generic): ExecutionNegotiation {
      const unresolved = request.input.parts.filter((p) => UNRESOLVED_PARTS.has(p.kind.case ?? ""));
      if (unresolved.length === 0) return generic;
      return {
        ...generic,
        supported: false,
        reasons: [
          ...generic.reasons,
          {
            code: "attachments_unsupported",
            severity: "blocking",
            message: `the harness cannot give the model ${unresolved.length} file / artifact / image reference(s); send images inline or by URL`,
          },
        ],
      };
    },
    async run(request: ExecutionRequest): Promise<ExecutionResult> {
      const failed = (category: string, message: string): ExecutionResult => ({
        status: "failed",
        messages: [],
        category,
        message,
        retryable: false,
      });
      let definition: HarnessDefinition;
      try {
        definition = parse(request.agent.definition);
      } catch (error) {
        if (error instanceof HarnessDefinitionError) {
          return failed("agent_definition_invalid", `harness agent: ${error.message}`);
        }
        throw error;
      }
      const toolNames = definition.tools ?? [...request.agent.tools];
      const missing = toolNames.filter((name) => !registry.has(name));
      if (missing.length > 0) {
        return failed(
          "agent_definition_invalid",
          `harness agent: no tool ${missing.join(", ")} in the harness registry`,
        );
      }
      const tools = new Map(toolNames.map((name) => [name, registry.get(name) as HarnessTool]));
      const factory = options.providers[definition.provider] as ModelProviderFactory;
      if (request.signal.aborted) return { status: "cancelled", messages: [] };
      let state: TurnState = {
        turn: [],
        steps: 0,
        usage: { prompt: 0, completion: 0, total: 0 },
        queue: [],
      };
      let resume: (Suspension & { payload: JsonValue }) | undefined;
      if (request.resume) {
        try {
          const decoded = decodeCheckpoint(request.resume.checkpoint);
          state = decoded.state;
          resume = { ...decoded, payload: request.resume.payload };
        } catch (error) {
          return failed(
            "harness_checkpoint_invalid",
            `cannot resume: ${error instanceof Error ? error.message : String(error)}`,
          );
        }
      }
      const environment = options.environment ?? {};
      // The agent's MCP servers: their tools join this turn's, closed when it ends.
      return runWithTurnMcp(definition.mcpServers, request, environment, mcpPolicy, tools, () =>
        new HarnessTurn(
          request,
          definition,
          factory(definition.model),
          tools,
          registry,
          ledger,
          inFlightWaitMs,
          state,
          environment,
        ).run(resume),
      );
    },
  });
}
