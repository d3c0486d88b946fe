/**
 * A running turn's progress (the backend's execution events) recorded in the
 * event log, as the UIs and receipts read it: `agent.text_delta`,
 * `agent.thinking_delta`, `agent.tool_use` (`agent.mcp_tool_use` for an MCP
 * server's tool, with its `server`), `tool.completed` / `tool.failed`,
 * `agent.model_call` (usage of a step) and `agent.routed` (where the router
 * placed the run — on a backend other than the agent's own, on a remote
 * worker, on a retry, or degraded, with the negotiation's warnings).
 *
 * Events go through the outbox like every other task event, so the log stays
 * one durable, replayable history. To keep that affordable for token streams,
 * events are written in batches: at most every `flushMs` while the turn runs
 * (consecutive deltas of one kind merged into one event), and once more
 * before the turn's outcome is recorded, so progress always precedes it.
 *
 * What the transcript or the task status already records is not repeated:
 * `message`, `tool_call_delta` and `turn_finished` events are skipped, and a
 * turn that reports nothing else (the scripted agent) costs no write at all.
 *
 * `agent.model_call` names the model: a step's usage (`step_finished`) is
 * joined with the model call record the built-in harness keeps in the
 * assistant message it reported just before (`llm:<call_id>` in its
 * metadata: provider, model, usage), so the event reads `{step, call_id,
 * provider, model, input_tokens, output_tokens, cached_tokens?}` — what
 * receipts take their model route and cost from. Other backends' steps keep
 * the usage they report.
 */

import type { JsonValue } from "@bufbuild/protobuf";
import type { Message } from "@trellis/contracts/core";
import { EVENT_KIND, textDelta, toolFinished, toolUse } from "@trellis/contracts/event-kinds";
import type { ExecutionEvent } from "@trellis/execution";
import type { Logger } from "@trellis/runtime";
import { isJsonObject } from "@trellis/runtime";

/** One recorded progress item: an event kind and its `data` payload. */
export interface ProgressItem {
  kind: string;
  data: { [key: string]: JsonValue };
}

/** A model call as an assistant message's `llm:<call_id>` record describes it. */
export interface ModelCallRecord {
  callId: string;
  provider: string;
  model: string;
  inputTokens?: number;
  outputTokens?: number;
  cachedTokens?: number;
}

function count(value: JsonValue | undefined): number | undefined {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 ? value : undefined;
}

/** The model call record (`llm:<call_id>`, kind `llm_provider_response`) of a message, if any. */
export function modelCallRecordOf(message: Message): ModelCallRecord | undefined {
  for (const [key, record] of Object.entries(message.metadata ?? {})) {
    if (!key.startsWith("llm:") || !isJsonObject(record)) continue;
    if (record.kind !== "llm_provider_response") continue;
    const { provider, model } = record;
    if (typeof provider !== "string" || provider === "" || typeof model !== "string") continue;
    const usage = isJsonObject(record.usage) ? record.usage : {};
    const input = count(usage.prompt_tokens);
    const output = count(usage.completion_tokens);
    const cached = count(usage.cached_tokens);
    return {
      callId: typeof record.call_id === "string" ? record.call_id : key.slice("llm:".length),
      provider,
      model: model || "unknown",
      ...(input === undefined ? {} : { inputTokens: input }),
      ...(output === undefined ? {} : { outputTokens: output }),
      ...(cached === undefined ? {} : { cachedTokens: cached }),
    };
  }
  return undefined;
}

/**
 * Maps an execution event to what the log records, or undefined when it
 * records nothing. `model` is the model call record of the message reported
 * just before a `step_finished` (see the module comment); `agentBackend` the
 * backend the agent names (a run placed elsewhere says so).
 */
export function progressItem(
  event: ExecutionEvent,
  model?: ModelCallRecord,
  agentBackend?: string,
): ProgressItem | undefined {
  switch (event.kind) {
    case "text_delta":
      return { kind: EVENT_KIND.textDelta, data: textDelta.encode({ text: event.text }) };
    case "thinking_delta":
      return { kind: EVENT_KIND.thinkingDelta, data: textDelta.encode({ text: event.text }) };
    case "tool_started":
      // An MCP server's tool: the same payload plus the server (Harn `agent.mcp_tool_use`).
      return {
        kind: event.mcpServer ? EVENT_KIND.mcpToolUse : EVENT_KIND.toolUse,
        data: toolUse.encode({
          toolCallId: event.toolCallId,
          name: event.name,
          ...(event.input === undefined ? {} : { input: event.input }),
          ...(event.mcpServer ? { server: event.mcpServer } : {}),
        }),
      };
    case "tool_finished":
      return {
        kind: event.status === "ok" ? EVENT_KIND.toolCompleted : EVENT_KIND.toolFailed,
        data: toolFinished.encode({
          toolCallId: event.toolCallId,
          name: event.name,
          status: event.status,
        }),
      };
    case "step_finished": {
      const usage = event.usage;
      const input = usage?.inputTokens ?? model?.inputTokens;
      const output = usage?.outputTokens ?? model?.outputTokens;
      return {
        kind: EVENT_KIND.modelCall,
        data: {
          step: event.iteration,
          ...(model
            ? {
                call_id: model.callId,
                provider: model.provider,
                model: model.model,
                ...(model.cachedTokens === undefined ? {} : { cached_tokens: model.cachedTokens }),
              }
            : {}),
          ...(input === undefined ? {} : { input_tokens: input }),
          ...(output === undefined ? {} : { output_tokens: output }),
          ...(usage?.costUnits === undefined ? {} : { cost_units: usage.costUnits }),
          ...(usage?.latencyMs === undefined ? {} : { latency_ms: usage.latencyMs }),
        },
      };
    }
    case "routed":
      // An in-process, first-attempt placement on the agent's own backend
      // without warnings says nothing the task does not: recorded only when
      // moved to another backend, remote, retried or degraded.
      if (
        !event.degraded &&
        event.workerId === "" &&
        event.attempt <= 1 &&
        (agentBackend === undefined || event.backendId === agentBackend)
      ) {
        return undefined;
      }
      return {
        kind: EVENT_KIND.routed,
        data: {
          backend_id: event.backendId,
          worker_id: event.workerId,
          attempt: event.attempt,
          degraded: event.degraded,
          reasons: event.reasons.map((reason) => ({
            code: reason.code,
            message: reason.message,
            severity: reason.severity,
          })),
        },
      };
    default:
      return undefined;
  }
}

/** Where a recorder writes its batches (the task store, for one claimed run). */
export type ProgressSink = (items: readonly ProgressItem[]) => Promise<void>;

/** Buffers one turn's progress and writes it in batches. */
export class ProgressRecorder {
  readonly #sink: ProgressSink;
  readonly #agentBackend: string | undefined;
  readonly #flushMs: number;
  readonly #logger: Logger;
  #buffer: ProgressItem[] = [];
  /** The model call record of the last message, until the step it belongs to is reported. */
  #model: ModelCallRecord | undefined;
  #timer: NodeJS.Timeout | undefined;
  #writing: Promise<void> = Promise.resolve();

  constructor(
    sink: ProgressSink,
    options: { flushMs: number; logger: Logger; agentBackend?: string },
  ) {
    this.#agentBackend = options.agentBackend;
    this.#sink = sink;
    this.#flushMs = options.flushMs;
    this.#logger = options.logger;
  }

  /** The executor's `onEvent`. */
  readonly add = (event: ExecutionEvent): void => {
    if (event.kind === "message") {
      const record = modelCallRecordOf(event.message);
      if (record) this.#model = record;
      return;
    }
    const item = progressItem(
      event,
      event.kind === "step_finished" ? this.#model : undefined,
      this.#agentBackend,
    );
    if (event.kind === "step_finished") this.#model = undefined;
    if (!item) return;
    const last = this.#buffer.at(-1);
    const mergeable = item.kind === EVENT_KIND.textDelta || item.kind === EVENT_KIND.thinkingDelta;
    if (mergeable && last?.kind === item.kind) {
      last.data = { text: `${String(last.data.text)}${String(item.data.text)}` };
    } else {
      this.#buffer.push(item);
    }
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.#flush();
    }, this.#flushMs);
  };

  /**
   * Records an item that is no execution event (the run's memory reads and
   * writes, `memory/run-memory.ts`), in order with the rest.
   */
  readonly record = (item: ProgressItem): void => {
    this.#buffer.push(item);
    this.#timer ??= setTimeout(() => {
      this.#timer = undefined;
      void this.#flush();
    }, this.#flushMs);
  };

  /** Writes what is buffered and waits for every write; call before recording the outcome. */
  async close(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#flush();
  }

  #flush(): Promise<void> {
    const items = this.#buffer;
    this.#buffer = [];
    // Batches are written one after another, so the log keeps their order.
    this.#writing = this.#writing.then(async () => {
      if (items.length === 0) return;
      try {
        await this.#sink(items);
      } catch (error) {
        // Progress is commentary on the turn; the transcript and outcome are
        // the record. A failed write is reported, never fatal to the turn.
        this.#logger.warn("recording turn progress failed; these events are dropped", {
          events: items.length,
          error: String(error),
        });
      }
    });
    return this.#writing;
  }
}
