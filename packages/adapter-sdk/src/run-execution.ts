/**
 * Running one execution with the guarantees every caller needs, whatever
 * the adapter does: it ends (a deadline from `requirements.maxElapsedMs`
 * becomes `failed` / `timeout`, retryable; a cancel becomes `cancelled`; an
 * adapter that ignores the abort is abandoned after a grace period), a
 * thrown error becomes a `failed` result, and no event is reported after
 * the result. Used by in-process routing and by workers alike.
 */
import { effectiveRequirements } from "./negotiation.js";
import type {
  ExecutionAdapter,
  ExecutionEvent,
  ExecutionRequest,
  ExecutionResult,
  NegotiationReason,
} from "./types.js";

/** Options of {@link runExecution}. */
export interface RunExecutionOptions {
  /** How long an aborted adapter may take to return (default 2000 ms). */
  graceMs?: number;
  /** Absolute deadline (epoch ms) overriding the one `maxElapsedMs` implies. */
  deadline?: number;
}

/** The reason a run was aborted at its deadline (tells timeouts from cancels). */
export class ExecutionTimeout extends Error {
  constructor(readonly limitMs: number) {
    super(`the execution ran longer than ${limitMs} ms`);
    this.name = "ExecutionTimeout";
  }
}

/** A `failed` result for a run stopped at its deadline. */
export function timeoutResult(
  limitMs: number,
  messages: ExecutionResult["messages"] = [],
): ExecutionResult {
  return {
    status: "failed",
    messages,
    category: "timeout",
    message: `the execution ran longer than its limit of ${limitMs} ms and was stopped`,
    retryable: true,
  };
}

/** A `failed` / `unsupported` result carrying the blocking reasons (never a fake success). */
export function unsupportedResult(
  reasons: NegotiationReason[],
  subject = "the backend",
): ExecutionResult {
  const blocking = reasons.filter((r) => r.severity === "blocking");
  const listed = (blocking.length ? blocking : reasons)
    .map((r) => `${r.code} (${r.message})`)
    .join("; ");
  return {
    status: "failed",
    messages: [],
    category: "unsupported",
    message: `${subject} cannot run this request: ${listed || "no reason given"}`,
    retryable: false,
    reasons,
  };
}

/** A `failed` result for an adapter that threw. */
export function adapterErrorResult(error: unknown): ExecutionResult {
  return {
    status: "failed",
    messages: [],
    category: "internal_error",
    message: `the agent backend failed: ${error instanceof Error ? error.message : String(error)}`,
    retryable: false,
  };
}

/**
 * Run `adapter.execute(request)` bounded by the request's deadline and its
 * signal. Resolves exactly once; never rejects.
 */
export function runExecution(
  adapter: Pick<ExecutionAdapter, "execute">,
  request: ExecutionRequest,
  options: RunExecutionOptions = {},
): Promise<ExecutionResult> {
  const graceMs = options.graceMs ?? 2000;
  const limit = effectiveRequirements(request).maxElapsedMs;
  const deadline = options.deadline ?? (limit !== undefined ? Date.now() + limit : undefined);
  const inner = new AbortController();
  let settled = false;
  const onEvent = request.onEvent;
  const forward = onEvent
    ? (event: ExecutionEvent) => {
        if (!settled) onEvent(event);
      }
    : undefined;
  return new Promise<ExecutionResult>((resolve) => {
    let graceTimer: NodeJS.Timeout | undefined;
    let deadlineTimer: NodeJS.Timeout | undefined;
    const limitMs = limit ?? (deadline !== undefined ? Math.max(0, deadline - Date.now()) : 0);
    const finish = (result: ExecutionResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(graceTimer);
      clearTimeout(deadlineTimer);
      request.signal.removeEventListener("abort", onCancel);
      resolve(result);
    };
    const timedOut = () => inner.signal.reason instanceof ExecutionTimeout;
    const startGrace = () => {
      graceTimer ??= setTimeout(() => {
        finish(timedOut() ? timeoutResult(limitMs) : { status: "cancelled", messages: [] });
      }, graceMs);
    };
    const onCancel = () => {
      if (!inner.signal.aborted) inner.abort(request.signal.reason ?? new Error("canceled"));
      startGrace();
    };
    if (deadline !== undefined) {
      deadlineTimer = setTimeout(
        () => {
          if (!inner.signal.aborted) inner.abort(new ExecutionTimeout(limitMs));
          startGrace();
        },
        Math.max(0, deadline - Date.now()),
      );
    }
    if (request.signal.aborted) onCancel();
    else request.signal.addEventListener("abort", onCancel, { once: true });
    let pending: Promise<ExecutionResult>;
    try {
      pending = adapter.execute({
        ...request,
        signal: inner.signal,
        ...(forward ? { onEvent: forward } : {}),
      });
    } catch (error) {
      pending = Promise.reject(error);
    }
    pending.then(
      (result) => {
        // Past its limit the run is a timeout, whatever came back late: the
        // limit is part of the request's contract.
        finish(timedOut() ? timeoutResult(limitMs, result.messages) : result);
      },
      (error: unknown) => finish(timedOut() ? timeoutResult(limitMs) : adapterErrorResult(error)),
    );
  });
}

/** A small single-consumer queue for turning callbacks into an async iterable. */
class EventQueue<T> {
  readonly #items: T[] = [];
  #waiter: (() => void) | undefined;
  #ended = false;

  push(item: T): void {
    this.#items.push(item);
    this.#wake();
  }

  end(): void {
    this.#ended = true;
    this.#wake();
  }

  #wake(): void {
    const waiter = this.#waiter;
    this.#waiter = undefined;
    waiter?.();
  }

  async *drain(): AsyncGenerator<T, void, undefined> {
    for (;;) {
      const item = this.#items.shift();
      if (item !== undefined) {
        yield item;
        continue;
      }
      if (this.#ended) return;
      await new Promise<void>((resolve) => {
        this.#waiter = resolve;
      });
    }
  }
}

/**
 * The streaming form of an execution: its progress events, then exactly one
 * `turn_finished` carrying the result.
 */
export async function* streamExecution(
  execute: (request: ExecutionRequest) => Promise<ExecutionResult>,
  request: Omit<ExecutionRequest, "onEvent">,
): AsyncGenerator<ExecutionEvent, void, undefined> {
  const queue = new EventQueue<ExecutionEvent>();
  let finished = false;
  void execute({
    ...request,
    onEvent: (event) => {
      if (!finished && event.kind !== "turn_finished") queue.push(event);
    },
  }).then(
    (result) => {
      finished = true;
      queue.push({ kind: "turn_finished", result });
      queue.end();
    },
    (error: unknown) => {
      finished = true;
      queue.push({ kind: "turn_finished", result: adapterErrorResult(error) });
      queue.end();
    },
  );
  yield* queue.drain();
}
