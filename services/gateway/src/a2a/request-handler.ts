/**
 * The A2A operations of one Trellis agent, for one authenticated request
 * (`A2ARequestHandler` of `@a2a-js/sdk`; the SDK's JSON-RPC transport calls
 * it). Nothing is kept here: an A2A task is the Trellis task, a context its
 * session, so every gateway replica answers for every task.
 *
 * Writes run the gateway's own REST routes (the same scope table, agent
 * policy, workspace visibility and rate limits as REST and WebSocket); the
 * A2A message id is their idempotency key, so a retried message never makes a
 * second task nor answers a suspension twice.
 *
 * - SendMessage without a taskId starts a turn: in the session named by
 *   contextId, else in a new session of this agent. With a taskId it answers
 *   that task's suspension (an approval: a data part `{approved}` or a yes/no
 *   text; a question: the text), which resumes it exactly once.
 * - Blocking sends wait until the task settles (completes, fails, is
 *   canceled or waits for input again); `returnImmediately` does not wait.
 * - Streams open the session's event stream before the write, then relay
 *   the task's text deltas as appends to its reply artifact and its status
 *   changes as status updates, and end when it settles.
 * - CancelTask is the task's real cancel; it answers once the backend has
 *   confirmed it (the task is CANCELED), or with the state it is in after a
 *   short wait.
 */
import { createHash } from "node:crypto";
import type {
  Message as A2aMessage,
  Task as A2aTask,
  AgentCard,
  CancelTaskRequest,
  DeleteTaskPushNotificationConfigRequest,
  GetExtendedAgentCardRequest,
  GetTaskPushNotificationConfigRequest,
  GetTaskRequest,
  ListTaskPushNotificationConfigsRequest,
  ListTaskPushNotificationConfigsResponse,
  ListTasksRequest,
  ListTasksResponse,
  SendMessageRequest,
  StreamResponse,
  SubscribeToTaskRequest,
  TaskPushNotificationConfig,
} from "@a2a-js/sdk";
import {
  ExtendedAgentCardNotConfiguredError,
  PushNotificationNotSupportedError,
  RequestMalformedError,
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from "@a2a-js/sdk/errors";
import type { A2ARequestHandler } from "@a2a-js/sdk/server";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { CallOptions } from "@connectrpc/connect";
import { type Event, TaskStatus } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import {
  type Agent,
  EventService,
  type StreamEventsResponse,
  type Task,
  TaskService,
} from "@trellis/contracts/tasks";
import { isTerminalStatus } from "@trellis/messages";
import type { Caller } from "@trellis/platform";
import type { HttpRequest, HttpResponse } from "@trellis/runtime";
import { authorize } from "../auth/scope-table.js";
import { toHarnError } from "../domain/errors.js";
import { createRestCall, outgoingCallOptions } from "../http/call.js";
import type { GatewayDeps, RestCall, RouteSpec } from "../http/context.js";
import { routePortsOf } from "../http/ports.js";
import { visibleSession, visibleTask } from "../http/routes/common.js";
import { restRuleOf } from "../http/routes/rules.js";
import {
  a2aTaskOf,
  harnMessageOf,
  isSettled,
  replyArtifactId,
  replyArtifactOf,
  statusUpdateOf,
  textPart,
} from "./mapping.js";

/** How long CancelTask waits for the backend to confirm before answering with the current state. */
const cancelConfirmMs = 10_000;

/** One A2A request's view of Trellis. */
export interface A2aRequestScope {
  deps: GatewayDeps;
  caller: Caller;
  agent: Agent;
  card: AgentCard;
  req: HttpRequest;
  res: HttpResponse;
  requestId: string;
  /** Aborted when the client goes away or the gateway shuts down. */
  signal: AbortSignal;
  /** The REST routes by `METHOD path` (the writes' implementations). */
  routes: ReadonlyMap<string, RouteSpec>;
}

/** A write refused on Trellis's side, as an A2A error. */
function a2aErrorOf(code: string, message: string): Error {
  switch (code) {
    case "resource_not_found":
      return new TaskNotFoundError(message);
    case "invalid_request":
    case "validation_error":
      return new RequestMalformedError(message);
    case "conflict":
      return new UnsupportedOperationError(message);
    default:
      return new Error(`${code}: ${message}`);
  }
}

export class TrellisA2aHandler implements A2ARequestHandler {
  constructor(private readonly scope: A2aRequestScope) {}

  async getAgentCard(): Promise<AgentCard> {
    return this.scope.card;
  }

  async getAuthenticatedExtendedAgentCard(
    _params: GetExtendedAgentCardRequest,
  ): Promise<AgentCard> {
    throw new ExtendedAgentCardNotConfiguredError("this agent has no extended card");
  }

  async sendMessage(params: SendMessageRequest): Promise<A2aMessage | A2aTask> {
    const task = await this.#start(params);
    if (params.configuration?.returnImmediately || isSettled(task.status)) {
      return a2aTaskOf(task, params.configuration?.historyLength);
    }
    return a2aTaskOf(await this.#settle(task.id), params.configuration?.historyLength);
  }

  async *sendMessageStream(
    params: SendMessageRequest,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const sessionId = await this.#sessionOfSend(params);
    const events = await this.#openEvents(sessionId);
    try {
      const task = await this.#start(params, sessionId);
      yield* this.#follow(task, events);
    } finally {
      await events.return?.();
    }
  }

  async getTask(params: GetTaskRequest): Promise<A2aTask> {
    return a2aTaskOf(await this.#task(params.id), params.historyLength);
  }

  async cancelTask(params: CancelTaskRequest): Promise<A2aTask> {
    const task = await this.#task(params.id);
    if (isTerminalStatus(task.status)) {
      throw new TaskNotCancelableError(`task ${task.id} has already ended`);
    }
    await this.#route(
      "POST",
      "/v1/tasks/{task_id}/cancel",
      { task_id: task.id },
      {
        reason: "canceled through A2A",
      },
    );
    const deadline = AbortSignal.any([this.scope.signal, AbortSignal.timeout(cancelConfirmMs)]);
    const settled = await this.#watch(task.id, false, deadline).catch(() => undefined);
    return a2aTaskOf(settled ?? (await this.#task(task.id)));
  }

  async *resubscribe(
    params: SubscribeToTaskRequest,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    const first = await this.#task(params.id);
    const events = await this.#openEvents(first.sessionId);
    try {
      // Read again after subscribing: nothing between the two reads is missed.
      yield* this.#follow(await this.#task(params.id), events);
    } finally {
      await events.return?.();
    }
  }

  async listTasks(_params: ListTasksRequest): Promise<ListTasksResponse> {
    throw new UnsupportedOperationError("ListTasks is not offered; read a task with GetTask");
  }

  async createTaskPushNotificationConfig(
    _params: TaskPushNotificationConfig,
  ): Promise<TaskPushNotificationConfig> {
    throw new PushNotificationNotSupportedError(
      "push notifications are not offered (use streaming)",
    );
  }

  async getTaskPushNotificationConfig(
    _params: GetTaskPushNotificationConfigRequest,
  ): Promise<TaskPushNotificationConfig> {
    throw new PushNotificationNotSupportedError("push notifications are not offered");
  }

  async listTaskPushNotificationConfigs(
    _params: ListTaskPushNotificationConfigsRequest,
  ): Promise<ListTaskPushNotificationConfigsResponse> {
    throw new PushNotificationNotSupportedError("push notifications are not offered");
  }

  async deleteTaskPushNotificationConfig(
    _params: DeleteTaskPushNotificationConfigRequest,
  ): Promise<void> {
    throw new PushNotificationNotSupportedError("push notifications are not offered");
  }

  // ------------------------------------------------------------------ helpers

  /** Call options on behalf of the caller. */
  #options(streaming: boolean, signal: AbortSignal = this.scope.signal): CallOptions {
    const { caller, requestId, deps } = this.scope;
    return outgoingCallOptions(
      { caller, requestId, upstreamTimeoutMs: deps.config.TRELLIS_UPSTREAM_TIMEOUT, signal },
      streaming,
    );
  }

  #call(params: Record<string, string>, body: JsonValue | undefined, key: string): RestCall {
    const { req, res, requestId, caller, deps, signal } = this.scope;
    return createRestCall({
      req,
      res,
      requestId,
      params,
      caller,
      body,
      idempotencyKey: key,
      ports: routePortsOf(deps),
      signal,
    });
  }

  /** Run a REST route as the caller (its scope rule, rate limits and checks). */
  async #route(
    method: "GET" | "POST",
    path: string,
    params: Record<string, string>,
    body: JsonValue | undefined,
    idempotencyKey = "",
  ): Promise<JsonObject> {
    const decision = authorize(this.scope.caller.scopes, restRuleOf(method, path));
    if (!decision.allowed) throw new Error(`permission_denied: ${decision.message}`);
    const route = this.scope.routes.get(`${method} ${path}`);
    if (route === undefined) throw new Error(`no route ${method} ${path}`);
    const guarded = this.scope.deps.limits?.wrap(route) ?? route;
    let response: Awaited<ReturnType<RouteSpec["handle"]>>;
    try {
      response = await guarded.handle(this.#call(params, body, idempotencyKey));
    } catch (error) {
      const envelope = toHarnError(error, this.scope.requestId);
      throw a2aErrorOf(envelope.body.error.code, envelope.body.error.message);
    }
    const text = typeof response?.body === "string" ? response.body : "";
    const json = (text === "" ? {} : JSON.parse(text)) as JsonObject;
    if (response === undefined || response.status >= 400) {
      const error = (json.error ?? {}) as { code?: string; message?: string };
      throw a2aErrorOf(error.code ?? "internal_error", error.message ?? "the request failed");
    }
    return json;
  }

  /** An idempotency key for a write made for the A2A message `messageId`. */
  #keyOf(purpose: string, messageId: string): string {
    if (messageId === "") return "";
    const { caller, agent } = this.scope;
    const hash = createHash("sha256")
      .update(`${caller.workspaceId}\n${caller.actorId}\n${agent.id}\n${purpose}\n${messageId}`)
      .digest("hex");
    return `a2a_${hash.slice(0, 40)}`;
  }

  /** A task of this agent the caller may see (TaskNotFound for anything else). */
  async #task(taskId: string): Promise<Task> {
    if (taskId.trim() === "") throw new RequestMalformedError("a task id is required");
    let task: Task;
    try {
      task = await visibleTask(this.#call({}, undefined, ""), taskId);
    } catch (error) {
      const envelope = toHarnError(error, this.scope.requestId);
      throw a2aErrorOf(envelope.body.error.code, envelope.body.error.message);
    }
    if (task.agentId !== this.scope.agent.id) {
      throw new TaskNotFoundError(`task ${JSON.stringify(taskId)} not found`);
    }
    return task;
  }

  /** The session a send works in: the named context (of this agent), else a new one. */
  async #sessionOfSend(params: SendMessageRequest): Promise<string> {
    const message = params.message;
    if (message === undefined) throw new RequestMalformedError("params.message is required");
    if (message.taskId !== "") return (await this.#task(message.taskId)).sessionId;
    if (message.contextId !== "") {
      let session: Awaited<ReturnType<typeof visibleSession>>;
      try {
        session = await visibleSession(this.#call({}, undefined, ""), message.contextId);
      } catch {
        throw new RequestMalformedError(`context ${JSON.stringify(message.contextId)} not found`);
      }
      if (session.agentId !== this.scope.agent.id) {
        throw new RequestMalformedError(`context ${JSON.stringify(message.contextId)} not found`);
      }
      return session.id;
    }
    const created = await this.#route(
      "POST",
      "/v1/sessions",
      {},
      { persona_id: this.scope.agent.id, metadata: { origin: "a2a" } },
      this.#keyOf("session", message.messageId),
    );
    return String(created.id);
  }

  /**
   * Start the turn of a send (or answer the suspension it names) and return
   * the task as it is right after.
   */
  async #start(params: SendMessageRequest, knownSession?: string): Promise<Task> {
    const message = params.message;
    const body = harnMessageOf(message);
    const messageId = message?.messageId ?? "";
    if (message?.taskId) {
      const task = await this.#task(message.taskId);
      if (isTerminalStatus(task.status)) {
        throw new UnsupportedOperationError(
          `task ${task.id} has ended (${TaskStatus[task.status]}); send without taskId to start a new one`,
        );
      }
      if (task.status !== TaskStatus.INPUT_REQUIRED) {
        throw new UnsupportedOperationError(
          `task ${task.id} is not waiting for input (${TaskStatus[task.status]})`,
        );
      }
      if (message.contextId !== "" && message.contextId !== task.sessionId) {
        throw new RequestMalformedError("contextId is not the task's context");
      }
      const kind = isApproval(task) ? "tool_confirmation" : "input";
      await this.#route(
        "POST",
        "/v1/tasks/{task_id}/messages",
        { task_id: task.id },
        { kind, message: body },
        this.#keyOf(`resume:${task.id}`, messageId),
      );
      return this.#task(task.id);
    }
    const sessionId = knownSession ?? (await this.#sessionOfSend(params));
    const submitted = await this.#route(
      "POST",
      "/v1/sessions/{session_id}/tasks",
      { session_id: sessionId },
      { input: body, persona_id: this.scope.agent.id, metadata: { origin: "a2a" } },
      this.#keyOf("task", messageId),
    );
    return this.#task(String(submitted.id));
  }

  /** Watch a task until it settles (or, with `untilSettled` false, until it ends). */
  async #watch(taskId: string, untilSettled: boolean, signal: AbortSignal): Promise<Task> {
    const done = new AbortController();
    const linked = AbortSignal.any([signal, done.signal]);
    let last: Task | undefined;
    try {
      for await (const response of this.scope.deps.clients
        .get(TaskService)
        .watchTask({ taskId, untilSettled }, this.#options(true, linked))) {
        if (response.task) last = response.task;
        if (last && (untilSettled ? isSettled(last.status) : isTerminalStatus(last.status)))
          return last;
      }
    } finally {
      done.abort();
    }
    if (last && isSettled(last.status)) return last;
    throw new Error(`the watch of task ${taskId} ended before it settled`);
  }

  async #settle(taskId: string): Promise<Task> {
    return this.#watch(taskId, true, this.scope.signal);
  }

  /** Open the session's event stream from now (registered when this returns). */
  async #openEvents(sessionId: string): Promise<AsyncIterator<StreamEventsResponse>> {
    const stream = this.scope.deps.clients
      .get(EventService)
      .streamEvents({ sessionId, fromNow: true }, this.#options(true));
    const iterator = stream[Symbol.asyncIterator]();
    await iterator.next();
    return iterator;
  }

  /** The A2A stream of `task` from its events, until it settles. */
  async *#follow(
    task: Task,
    events: AsyncIterator<StreamEventsResponse>,
  ): AsyncGenerator<StreamResponse, void, undefined> {
    yield { payload: { $case: "task", value: a2aTaskOf(task) } };
    let current = task;
    let chunks = 0;
    while (!isSettled(current.status)) {
      const next = await events.next();
      if (next.done) {
        // The stream ended early (shutdown, an upstream restart): settle by watching.
        current = await this.#settle(current.id);
        break;
      }
      const event = next.value.event;
      if (event === undefined || !isOfTask(event, task.id)) continue;
      if (event.kind === EVENT_KIND.textDelta) {
        const text = textOf(event);
        if (text === "") continue;
        yield {
          payload: {
            $case: "artifactUpdate",
            value: {
              taskId: task.id,
              contextId: task.sessionId,
              artifact: {
                artifactId: replyArtifactId(task.id),
                name: "reply",
                description: "",
                parts: [textPart(text)],
                metadata: undefined,
                extensions: [],
              },
              append: chunks++ > 0,
              lastChunk: false,
              metadata: undefined,
            },
          },
        };
        continue;
      }
      if (event.payload?.kind.case !== "taskStatusChanged") continue;
      current = await this.#task(task.id);
      if (!isSettled(current.status)) {
        yield { payload: { $case: "statusUpdate", value: statusUpdateOf(current) } };
      }
    }
    const artifact = isTerminalStatus(current.status) ? replyArtifactOf(current) : undefined;
    if (artifact) {
      yield {
        payload: {
          $case: "artifactUpdate",
          value: {
            taskId: current.id,
            contextId: current.sessionId,
            artifact,
            append: false,
            lastChunk: true,
            metadata: undefined,
          },
        },
      };
    }
    yield { payload: { $case: "statusUpdate", value: statusUpdateOf(current) } };
  }
}

function isOfTask(event: Event, taskId: string): boolean {
  return (
    event.taskId === taskId || (event.resource?.object === "task" && event.resource.id === taskId)
  );
}

function textOf(event: Event): string {
  const payload = event.payload?.kind;
  if (payload?.case !== "data") return "";
  const text = payload.value.text;
  return typeof text === "string" ? text : "";
}

/** Whether a suspended task waits for an approval (else for input). */
function isApproval(task: Task): boolean {
  const kind = task.suspension?.metadata?.kind;
  return kind === "approval" || kind === "tool_approval";
}
