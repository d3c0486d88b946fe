/** Tasks: submit, read, cancel, and messages to a running task. */
import { randomBytes } from "node:crypto";
import { create, type JsonObject, toJson } from "@bufbuild/protobuf";
import { timestampNow, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  type ExecutionRequirements,
  ExecutionRequirementsSchema,
  Requirement,
  TraceDepth,
} from "@trellis/contracts/adapters";
import { type Message, MessageSchema, type TaskStatus } from "@trellis/contracts/core";
import { BusyPolicy, SignalService, type Task, TaskService } from "@trellis/contracts/tasks";
import { errors, TrellisError } from "@trellis/runtime";
import { messageFromHarn, taskInputFromHarn } from "../../domain/harn-input.js";
import { messageToHarn, parseTaskStatus, taskToHarn, toValue } from "../../domain/harn-json.js";
import { isJsonObject, JsonReader } from "../../domain/json-input.js";
import { ensureAgentAllowed, ensureRunAllowed } from "../../policy/agent-policy.js";
import type { RestCall } from "../context.js";
import type { RestResponse } from "../io.js";
import {
  accepted,
  created,
  ok,
  param,
  queryString,
  queryWorkspace,
  required,
  visibleSession,
  visibleTask,
} from "./common.js";
import { okPage, pageOf } from "./paging.js";
import { withReceiptIds } from "./task-receipts.js";

export const busyPolicies = {
  enqueue: BusyPolicy.ENQUEUE,
  reject: BusyPolicy.REJECT,
  interrupt: BusyPolicy.INTERRUPT,
};

/**
 * Submit a task (`POST /v1/sessions/{id}/tasks`, or `POST /v1/tasks` with
 * `session_id` in the body, where the OpenAPI document makes it required).
 */
export async function submitTask(
  call: RestCall,
  pathSessionId: string | undefined,
): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const sessionId = pathSessionId ?? body.requiredString("session_id");
  const input = taskInputFromHarn(body.raw("input"), "input");
  const busy = body.enum("busy_policy", ["enqueue", "reject", "interrupt"] as const);
  const metadata = body.object("metadata");
  const requirements = requirementsFromJson(body.object("requirements"));
  const agentId = body.string("persona_id") ?? "";
  const parentTaskId = body.string("parent_task_id") ?? "";
  const session = await visibleSession(call, sessionId);
  // The agent the turn runs: the one named, else the session's.
  await ensureRunAllowed(call.caller, agentId, async () => session.agentId, "persona_id");
  const { task } = await call.ports.clients.get(TaskService).submitTask(
    {
      sessionId,
      agentId,
      input,
      busyPolicy: busy ? busyPolicies[busy] : BusyPolicy.UNSPECIFIED,
      idempotencyKey: call.idempotencyKey,
      parentTaskId,
      ...(metadata ? { metadata } : {}),
      ...(requirements ? { requirements } : {}),
    },
    call.options(),
  );
  return accepted(taskToHarn(required(task, "task", "")));
}

const REQUIREMENT_LEVELS: Readonly<Record<string, Requirement>> = {
  forbidden: Requirement.FORBIDDEN,
  none: Requirement.NONE,
  allowed: Requirement.ALLOWED,
  preferred: Requirement.PREFERRED,
  required: Requirement.REQUIRED,
};
const TRACE_DEPTHS: Readonly<Record<string, TraceDepth>> = {
  minimal: TraceDepth.MINIMAL,
  standard: TraceDepth.STANDARD,
  detailed: TraceDepth.DETAILED,
};
const LEVEL_FIELDS = {
  tool_use: "toolUse",
  structured_tool_calls: "structuredToolCalls",
  continuation_support: "continuationSupport",
  approval_interrupts: "approvalInterrupts",
  attachments: "attachments",
  streaming: "streaming",
} as const;

/**
 * A task's own `requirements` (`{"approval_interrupts": "required",
 * "trace_depth": "detailed", "max_elapsed_ms": 30000}`), the agent
 * definition's `routing.requirements` vocabulary. Which level a field takes
 * is the tasks service's to check (it names the field).
 */
export function requirementsFromJson(
  raw: JsonObject | undefined,
): ExecutionRequirements | undefined {
  if (raw === undefined) return undefined;
  const out = create(ExecutionRequirementsSchema);
  for (const [key, value] of Object.entries(raw)) {
    const param = `requirements.${key}`;
    if (key === "max_elapsed_ms") {
      if (
        typeof value !== "number" ||
        !Number.isInteger(value) ||
        value < 1 ||
        value > 0xffffffff
      ) {
        throw errors.invalid(`${param} must be a positive whole number of ms`, param);
      }
      out.maxElapsedMs = value;
    } else if (key === "trace_depth") {
      const depth = typeof value === "string" ? TRACE_DEPTHS[value] : undefined;
      if (depth === undefined) {
        throw errors.invalid(`${param} must be minimal, standard or detailed`, param);
      }
      out.traceDepth = depth;
    } else if (Object.hasOwn(LEVEL_FIELDS, key)) {
      const level = typeof value === "string" ? REQUIREMENT_LEVELS[value] : undefined;
      if (level === undefined) {
        throw errors.invalid(
          `${param} must be one of ${Object.keys(REQUIREMENT_LEVELS).join(", ")}`,
          param,
        );
      }
      out[LEVEL_FIELDS[key as keyof typeof LEVEL_FIELDS]] = level;
    } else {
      throw errors.invalid(`${param.slice(0, 100)} is not a requirement`, "requirements");
    }
  }
  return out;
}

export function statusesOf(call: RestCall): TaskStatus[] {
  const raw = call.query
    .getAll("status")
    .flatMap((s) => s.split(","))
    .filter((s) => s !== "");
  return raw.map((name) => {
    const status = parseTaskStatus(name.trim().toUpperCase());
    if (status === undefined) {
      throw errors.invalid(
        `status must be a task status such as WORKING, got ${JSON.stringify(name)}`,
        "status",
      );
    }
    return status;
  });
}

export async function listTasks(
  call: RestCall,
  pathSessionId: string | undefined,
): Promise<RestResponse> {
  const sessionId = pathSessionId ?? queryString(call, "session_id");
  if (sessionId !== undefined) await visibleSession(call, sessionId);
  const response = await call.ports.clients.get(TaskService).listTasks(
    {
      sessionId: sessionId ?? "",
      workspaceId: sessionId === undefined ? queryWorkspace(call) : "",
      statuses: statusesOf(call),
      ...pageOf(call),
    },
    call.options(),
  );
  const tasks = await withReceiptIds(call, response.tasks);
  return okPage(tasks, taskToHarn, response.nextPageToken);
}

export async function getTask(call: RestCall): Promise<RestResponse> {
  const [task] = await withReceiptIds(call, [await visibleTask(call, param(call, "task_id"))]);
  return ok(taskToHarn(task as Task));
}

export async function cancelTask(call: RestCall): Promise<RestResponse> {
  const id = param(call, "task_id");
  await visibleTask(call, id);
  const body = JsonReader.body(call.body);
  const { task } = await call.ports.clients
    .get(TaskService)
    .cancelTask({ taskId: id, reason: body.string("reason") ?? "" }, call.options());
  return ok(taskToHarn(required(task, "task", id)));
}

/**
 * The payload of a signal that answers a suspended task: `{kind, message}`
 * (the message in proto JSON); a tool confirmation also carries `approved`
 * (from a JSON part `{approved: …}`, else from a yes/no text), which is how
 * the tasks service tells a confirmation from plain input.
 */
export function signalPayload(kind: "input" | "tool_confirmation", message: Message): JsonObject {
  const payload: JsonObject = { kind, message: toJson(MessageSchema, message) as JsonObject };
  if (kind !== "tool_confirmation") return payload;
  let approved: boolean | undefined;
  for (const part of message.parts) {
    if (part.kind.case === "json") {
      const value = part.kind.value.value ? toJson(ValueSchema, part.kind.value.value) : null;
      if (isJsonObject(value) && typeof value.approved === "boolean") {
        approved = value.approved;
        for (const [k, v] of Object.entries(value)) if (!(k in payload)) payload[k] = v;
        break;
      }
    }
    if (part.kind.case === "text" && approved === undefined) {
      const text = part.kind.value.text.trim().toLowerCase();
      if (/^(y|yes|ok|approve|approved|allow|accept)\b/.test(text)) approved = true;
      else if (/^(n|no|deny|denied|reject|rejected|refuse)\b/.test(text)) approved = false;
    }
  }
  payload.approved = approved ?? false;
  return payload;
}

/**
 * `POST /v1/tasks/{id}/messages`: `input` and `tool_confirmation` resume a
 * suspended task through its signal (payload `{kind, message}` with the
 * message in proto JSON); `interrupt` submits the message as a new turn that
 * interrupts the running one.
 */
export async function appendTaskMessage(call: RestCall): Promise<RestResponse> {
  const id = param(call, "task_id");
  const body = JsonReader.body(call.body);
  const kind = body.enum("kind", ["input", "interrupt", "tool_confirmation"] as const);
  if (kind === undefined) throw errors.invalid("missing required field: kind", "kind");
  const reader = body.reader("message");
  if (reader === undefined) throw errors.invalid("missing required field: message", "message");
  const message = messageFromHarn(reader);
  const task = await visibleTask(call, id);
  // Resuming or interrupting makes the task's agent run again.
  ensureAgentAllowed(call.caller, task.agentId, "task_id");

  if (kind === "interrupt") {
    const { task: next } = await call.ports.clients.get(TaskService).submitTask(
      {
        sessionId: task.sessionId,
        agentId: task.agentId,
        input: message,
        busyPolicy: BusyPolicy.INTERRUPT,
        idempotencyKey: call.idempotencyKey,
      },
      call.options(),
    );
    const submitted = required(next, "task", "");
    return created(
      messageToHarn(submitted.input ?? message, {
        sessionId: submitted.sessionId,
        taskId: submitted.id,
      }),
    );
  }

  const signalId = task.suspension?.signalId ?? "";
  if (signalId === "") {
    throw new TrellisError({
      reason: "conflict",
      message: `task ${JSON.stringify(id)} is not waiting for input`,
      metadata: { task_id: id },
    });
  }
  // Same id for retries with the same Idempotency-Key.
  message.id = call.idempotencyKey
    ? `msg_${call.idempotencyKey.slice(0, 26)}`
    : `msg_${randomBytes(13).toString("hex")}`;
  message.createdAt = timestampNow();
  await call.ports.clients
    .get(SignalService)
    .deliver(
      { signalId, payload: toValue(signalPayload(kind, message)), deliveryId: call.idempotencyKey },
      call.options(),
    );
  return created(messageToHarn(message, { sessionId: task.sessionId, taskId: task.id }));
}
