/**
 * The WebSocket profile's frames (Harn v1 "WebSocket"): JSON objects with a
 * `type`. Every client frame is a command that maps onto one REST write, so
 * both transports share validation, authorization, idempotency and quotas.
 *
 * Client → server
 *   {type: "message", input, persona_id?, busy_policy?, metadata?}   submit a task (a user message)
 *   {type: "cancel", task_id?, reason?}                             cancel a task
 *   {type: "truncate", keep_turns}                                  truncate the session
 *   {type: "signal", task_id?, kind, message}                       input / tool confirmation / interrupt
 *   {type: "approve", task_id?, approved}                           answer a tool approval request
 *   {type: "ping"}                                                  app-level liveness check
 * Every command may carry `id` (echoed in its reply) and `idempotency_key`.
 *
 * Server → client
 *   ready, event {replayed, cursor, event}, replay_complete, input_request,
 *   authorization_request, approval_request, heartbeat, result, error, pong.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { TrellisError } from "@trellis/runtime";
import { isJsonObject } from "../domain/json-input.js";

/** A command: the REST write it stands for. */
export interface WsCommand {
  type: "message" | "cancel" | "truncate" | "signal" | "approve";
  /** Client correlation id, echoed in the reply. */
  id: string | null;
  idempotencyKey: string | undefined;
  /** The REST route pattern (POST) it maps to, and its path parameters. */
  path: string;
  params: Record<string, string>;
  body: JsonObject;
}

/** A parsed client frame. */
export type ClientFrame =
  | { kind: "ping"; id: string | null }
  | { kind: "command"; command: WsCommand };

/** Where commands go when they name no session or task. */
export interface FrameDefaults {
  sessionId: string;
  /** The task of a task-scoped connection. */
  taskId?: string;
}

function invalid(message: string, param?: string): TrellisError {
  return new TrellisError({ reason: "invalid_request", message, ...(param ? { param } : {}) });
}

const printable = /^[\x20-\x7e]+$/;

/** The correlation id of a frame, if it has a usable one (for error replies). */
export function frameIdOf(value: JsonValue | undefined): string | null {
  if (!isJsonObject(value)) return null;
  const id = value.id;
  return typeof id === "string" && id.length <= 128 && printable.test(id) ? id : null;
}

function optionalString(frame: JsonObject, key: string): string | undefined {
  const value = frame[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== "string" || value === "")
    throw invalid(`${key} must be a non-empty string`, key);
  return value;
}

/** Validate a client frame (already parsed JSON) into a command. */
export function parseClientFrame(
  value: JsonValue | undefined,
  defaults: FrameDefaults,
): ClientFrame {
  if (!isJsonObject(value)) throw invalid("a frame must be a JSON object with a type");
  const type = value.type;
  if (typeof type !== "string") throw invalid("missing required field: type", "type");
  if (value.id !== undefined && frameIdOf(value) === null) {
    throw invalid("id must be 1–128 printable ASCII characters", "id");
  }
  const id = frameIdOf(value);
  const key = value.idempotency_key;
  if (key !== undefined && (typeof key !== "string" || key.length > 255 || !printable.test(key))) {
    throw invalid("idempotency_key must be 1–255 printable ASCII characters", "idempotency_key");
  }
  const idempotencyKey = typeof key === "string" ? key : undefined;
  const rest: JsonObject = {};
  for (const [k, v] of Object.entries(value)) {
    if (k !== "type" && k !== "id" && k !== "idempotency_key") rest[k] = v;
  }
  const taskOf = () => {
    const taskId = optionalString(rest, "task_id") ?? defaults.taskId;
    if (taskId === undefined) throw invalid("missing required field: task_id", "task_id");
    delete rest.task_id;
    return taskId;
  };
  const command = (
    t: WsCommand["type"],
    path: string,
    params: Record<string, string>,
    body: JsonObject,
  ): ClientFrame => ({
    kind: "command",
    command: { type: t, id, idempotencyKey, path, params, body },
  });

  switch (type) {
    case "ping":
      return { kind: "ping", id };
    case "message":
      return command(
        "message",
        "/v1/sessions/{session_id}/tasks",
        { session_id: defaults.sessionId },
        rest,
      );
    case "cancel": {
      const taskId = taskOf();
      return command("cancel", "/v1/tasks/{task_id}/cancel", { task_id: taskId }, rest);
    }
    case "truncate":
      return command(
        "truncate",
        "/v1/sessions/{session_id}/truncate",
        { session_id: defaults.sessionId },
        rest,
      );
    case "signal": {
      const taskId = taskOf();
      return command("signal", "/v1/tasks/{task_id}/messages", { task_id: taskId }, rest);
    }
    case "approve": {
      const taskId = taskOf();
      if (typeof rest.approved !== "boolean") {
        throw invalid("approved must be true or false", "approved");
      }
      const body: JsonObject = {
        kind: "tool_confirmation",
        message: { role: "user", parts: [{ type: "json", value: { approved: rest.approved } }] },
      };
      return command("approve", "/v1/tasks/{task_id}/messages", { task_id: taskId }, body);
    }
    default:
      throw invalid(
        `unknown frame type ${JSON.stringify(type.slice(0, 64))}; expected message, cancel, truncate, signal, approve or ping`,
        "type",
      );
  }
}
