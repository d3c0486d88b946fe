/**
 * The router: the {@link AgentExecutor} every caller uses. For each
 * execution it negotiates with every backend the agent allows, excludes the
 * ones with blocking reasons, picks one by the agent's policy
 * (`./policy.ts`) and dispatches to it — in process (the adapter is called
 * right here) or to remote workers (a {@link RemoteDispatcher}: JetStream in
 * distributed mode). The same code decides in both modes.
 *
 * What the caller sees, whatever happens: a `routed` event naming the
 * backend and any degradation (warnings), the backend's progress, then
 * exactly one `turn_finished` — and the same result from `execute`. No
 * suitable backend is `failed` / `unsupported` with the machine-readable
 * reasons, never a silent fallback.
 */
import { randomUUID } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import {
  type AgentExecutor,
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionResult,
  effectiveRequirements,
  type NegotiationReason,
  negotiateCapabilities,
  negotiateWith,
  requirementProblems,
  runExecution,
  streamExecution,
} from "@trellis/adapter-sdk";
import { isTrellisError, type Logger, TrellisError, withSpan } from "@trellis/runtime";
import {
  type Decision,
  decide,
  noBackendResult,
  type PreparedRequest,
  prepareRequest,
  routingFromDefinition,
  wrapCheckpoint,
} from "./policy.js";
import type { BackendRegistry, BackendView } from "./registry.js";

/** One placement of an execution on a remote backend. */
export interface DispatchPlan {
  executionId: string;
  view: BackendView;
  /** The prepared request (its `onEvent` is not used; report through `emit`). */
  request: ExecutionRequest;
  /** The router's negotiation with the backend. */
  negotiation: ExecutionNegotiation;
  /** Report progress (the router forwards it to the caller). */
  emit(event: ExecutionEvent): void;
}

/** How a dispatch ended: a result, or the backend refused at claim time. */
export type DispatchOutcome = { result: ExecutionResult } | { refused: ExecutionNegotiation };

/** Places executions on remote workers (JetStream in distributed mode). */
export interface RemoteDispatcher {
  dispatch(plan: DispatchPlan): Promise<DispatchOutcome>;
}

/** Options of {@link Router}. */
export interface RouterOptions {
  registry: BackendRegistry;
  /** Remote workers; without it only in-process backends run. */
  remote?: RemoteDispatcher;
  /** How long an aborted in-process adapter may take to return (default 2000 ms). */
  graceMs?: number;
  logger?: Logger;
}

function failed(category: string, message: string, retryable = false): ExecutionResult {
  return { status: "failed", messages: [], category, message, retryable };
}

/** Reasons that are the same finding only once (by code, severity and message). */
function unique(reasons: NegotiationReason[]): NegotiationReason[] {
  const seen = new Set<string>();
  return reasons.filter((r) => {
    const key = `${r.code}|${r.severity}|${r.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** The executor that routes. */
export class Router implements AgentExecutor {
  readonly registry: BackendRegistry;
  readonly #remote: RemoteDispatcher | undefined;
  readonly #graceMs: number;
  readonly #logger: Logger | undefined;

  constructor(options: RouterOptions) {
    this.registry = options.registry;
    this.#remote = options.remote;
    this.#graceMs = options.graceMs ?? 2000;
    this.#logger = options.logger;
  }

  backends(): readonly string[] {
    return this.registry.backends().map((b) => b.backendId);
  }

  /**
   * Check an agent definition: its routing policy here, the rest by every
   * backend it may be routed to that runs in this process (a remote backend
   * checks it when it runs). Throws `agent_definition_invalid`.
   */
  validateDefinition(backend: string, definition: JsonObject): void {
    const { policy, definition: rest } = routingFromDefinition(definition);
    if (policy?.pinnedBackend) {
      const allowed = new Set([backend, ...(policy.allowedBackends ?? [])]);
      if (!allowed.has(policy.pinnedBackend)) {
        throw new TrellisError({
          reason: "agent_definition_invalid",
          message: `agent.definition.routing.pinned: ${policy.pinnedBackend} is not one of the agent's backends`,
          param: "agent.definition.routing.pinned",
        });
      }
    }
    // Every backend the turn may be routed to must accept the definition, not
    // only the primary one (a remote backend checks it when it runs).
    const backends = [backend, ...(policy?.allowedBackends ?? []).filter((b) => b !== backend)];
    for (const id of backends) {
      const adapter = this.registry.localAdapter(id);
      if (!adapter?.validateDefinition) continue;
      try {
        adapter.validateDefinition(rest);
      } catch (error) {
        if (id === backend) throw error;
        throw new TrellisError({
          reason: "agent_definition_invalid",
          message: `agent.definition: backend ${id} of routing.backends refuses it: ${error instanceof Error ? error.message : String(error)}`,
          param: "agent.definition",
          metadata: { backend_id: id },
        });
      }
    }
  }

  /** Negotiate a request with one backend as the router sees it (pure). */
  negotiate(view: BackendView, request: ExecutionRequest): ExecutionNegotiation {
    return view.adapter
      ? negotiateWith(view.adapter, request)
      : negotiateCapabilities(view.capabilities, request);
  }

  /**
   * Where a request would run, without running it. Throws a TrellisError
   * for a request that is itself invalid.
   */
  plan(request: ExecutionRequest): { prepared: PreparedRequest; decision: Decision } {
    const prepared = prepareRequest(request);
    const [problem] = requirementProblems(effectiveRequirements(prepared.request));
    if (problem) {
      throw new TrellisError({
        reason: "execution_contract_invalid",
        message: `requirements.${problem.field}: ${problem.message}`,
        param: `request.requirements.${problem.field}`,
      });
    }
    const decision = decide({
      prepared,
      view: (id) => this.registry.backend(id),
      negotiate: (view, r) => this.negotiate(view, r),
    });
    return { prepared, decision };
  }

  /**
   * The refusal `request` would get now because no backend the agent allows
   * has what it requires (`unsupported`, with every blocking reason), else
   * undefined. While an allowed backend has no live worker it does not
   * refuse (a worker may join, with what the request needs, before the turn
   * runs: then the turn itself is refused if none did); an invalid request
   * throws.
   */
  preflight(request: ExecutionRequest): ExecutionResult | undefined {
    const { decision } = this.plan(request);
    if (decision.chosen) return undefined;
    if (decision.reasons.some((r) => r.code === "backend_unavailable")) return undefined;
    const result = noBackendResult(decision.reasons);
    return result.status === "failed" && result.category === "unsupported" ? result : undefined;
  }

  /** Route and run one execution (one span, `trellis.route`, around it). */
  execute(request: ExecutionRequest): Promise<ExecutionResult> {
    return withSpan("trellis.route", {}, async (span) => {
      const result = await this.#execute(request);
      span.setAttribute("trellis.execution_status", result.status);
      return result;
    });
  }

  async #execute(request: ExecutionRequest): Promise<ExecutionResult> {
    const onEvent = request.onEvent;
    let finished = false;
    const emit = (event: ExecutionEvent) => {
      // Exactly one turn_finished, always last, and only the router's.
      if (finished || event.kind === "turn_finished") return;
      onEvent?.(event);
    };
    const finish = (result: ExecutionResult): ExecutionResult => {
      if (!finished) {
        finished = true;
        onEvent?.({ kind: "turn_finished", result });
      }
      return result;
    };
    let prepared: PreparedRequest;
    try {
      prepared = this.plan(request).prepared;
    } catch (error) {
      if (isTrellisError(error)) return finish(failed(error.reason, error.message));
      throw error;
    }
    const executionId = `exe_${randomUUID().replaceAll("-", "")}`;
    const excluded = new Map<string, NegotiationReason[]>();
    for (;;) {
      const decision = decide({
        prepared,
        view: (id) => this.registry.backend(id),
        negotiate: (view, r) => this.negotiate(view, r),
        excluded,
      });
      const chosen = decision.chosen;
      const view = chosen && this.registry.backend(chosen.backendId);
      if (!chosen || !view) return finish(noBackendResult(decision.reasons));
      const untrack = this.registry.track(chosen.backendId);
      let outcome: DispatchOutcome;
      try {
        outcome = view.inProcess
          ? { result: await this.#runLocal(view, prepared.request, decision, emit) }
          : await this.#runRemote(executionId, view, prepared.request, chosen.negotiation, emit);
      } finally {
        untrack();
      }
      if ("refused" in outcome) {
        // The worker's own negotiation blocked it: try the next backend.
        excluded.set(chosen.backendId, outcome.refused.reasons);
        this.#logger?.info("backend refused an execution at claim; rerouting", {
          execution_id: executionId,
          backend: chosen.backendId,
        });
        continue;
      }
      return finish(this.#complete(outcome.result, chosen.backendId, decision.reasons));
    }
  }

  /** The execution as events, ending with exactly one `turn_finished`. */
  executeStreaming(request: Omit<ExecutionRequest, "onEvent">): AsyncIterable<ExecutionEvent> {
    return streamExecution((r) => this.execute(r), request);
  }

  async #runLocal(
    view: BackendView,
    request: ExecutionRequest,
    decision: Decision,
    emit: (event: ExecutionEvent) => void,
  ): Promise<ExecutionResult> {
    const adapter = view.adapter;
    if (!adapter) throw new Error(`backend ${view.backendId} has no in-process adapter`);
    emit({
      kind: "routed",
      backendId: view.backendId,
      workerId: "",
      attempt: 1,
      degraded: decision.chosen?.negotiation.degraded ?? false,
      reasons: decision.reasons,
    });
    return withSpan(
      "trellis.adapter.run",
      { attributes: { "trellis.backend_id": view.backendId } },
      () =>
        runExecution(
          adapter,
          {
            ...request,
            onEvent: (event) => {
              if (event.kind !== "routed") emit(event);
            },
          },
          { graceMs: this.#graceMs },
        ),
    );
  }

  async #runRemote(
    executionId: string,
    view: BackendView,
    request: ExecutionRequest,
    negotiation: ExecutionNegotiation,
    emit: (event: ExecutionEvent) => void,
  ): Promise<DispatchOutcome> {
    if (!this.#remote) {
      return { result: failed("backend_unavailable", "no remote dispatcher", true) };
    }
    try {
      return await this.#remote.dispatch({ executionId, view, request, negotiation, emit });
    } catch (error) {
      this.#logger?.warn("dispatching an execution failed", {
        execution_id: executionId,
        backend: view.backendId,
        error: String(error),
      });
      return {
        result: failed(
          "backend_unavailable",
          `the work queue could not take the execution: ${error instanceof Error ? error.message : String(error)}`,
          true,
        ),
      };
    }
  }

  #complete(
    result: ExecutionResult,
    backendId: string,
    reasons: NegotiationReason[],
  ): ExecutionResult {
    const degradation = unique([
      ...reasons.filter((r) => r.severity === "warning"),
      ...(result.degradation ?? []),
    ]);
    const completed: ExecutionResult = {
      ...result,
      backendId,
      ...(degradation.length ? { degradation } : {}),
    };
    if (completed.status === "suspended") {
      // A resume must come back to the backend that holds the state.
      return { ...completed, checkpoint: wrapCheckpoint(backendId, completed.checkpoint) };
    }
    return completed;
  }
}
