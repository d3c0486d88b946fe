/**
 * `POST /v1/tasks/{task_id}/replay` (Harn replay contract): a new task that
 * replays the source task from its recorded events, in a session forked from
 * the source's. The body is optional:
 *
 * ```json
 * { "mode": "exact" | "with_overrides" | "from_checkpoint",
 *   "override": { "llm:main:1": { "kind": "llm_provider_response", "value": {…} } },
 *   "checkpoint_id": "chk_…", "checkpoint_event_id": "evt_…",
 *   "reason": "…", "metadata": {…}, "refresh_memory": false }
 * ```
 *
 * Answers 202 with the replay task (`parent_task_id` = the source). A source
 * of another workspace is 404; a replay that could not proceed (its
 * recording lacks something) is 410 `cursor_expired`, naming what is missing
 * in `details.missing`.
 */
import { create, type JsonObject } from "@bufbuild/protobuf";
import { Visibility } from "@trellis/contracts/core";
import {
  ReplayMode,
  type ReplayOverride,
  ReplayOverrideSchema,
  TaskService,
} from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { taskToHarn, toValue } from "../../domain/harn-json.js";
import { JsonReader } from "../../domain/json-input.js";
import { ensureAgentAllowed } from "../../policy/agent-policy.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import { accepted, param, required, visibleTask } from "./common.js";

const modes = {
  exact: ReplayMode.EXACT,
  with_overrides: ReplayMode.WITH_OVERRIDES,
  from_checkpoint: ReplayMode.FROM_CHECKPOINT,
} as const;

const visibilities = {
  public: Visibility.PUBLIC,
  internal: Visibility.INTERNAL,
  receipt_only: Visibility.RECEIPT_ONLY,
} as const;

/** One entry of `override` (Harn `ReplayOverride`). */
function overrideFrom(reader: JsonReader): ReplayOverride {
  const kind = reader.requiredString("kind");
  const visibility = reader.enum("visibility", ["public", "internal", "receipt_only"] as const);
  const value = reader.value.value;
  return create(ReplayOverrideSchema, {
    kind,
    eventId: reader.string("event_id") ?? "",
    target: reader.string("target") ?? "",
    // `null` is a value a dependency may be replaced with; only absence is none.
    ...(value !== undefined ? { value: toValue(value) } : {}),
    artifactId: reader.string("artifact_id") ?? "",
    sha256: reader.string("sha256") ?? "",
    visibility: visibilities[visibility ?? "receipt_only"],
    reason: reader.string("reason") ?? "",
  });
}

export async function replayTask(call: RestCall): Promise<RestResponse> {
  const id = param(call, "task_id");
  const body = JsonReader.body(call.body);
  const mode = body.enum("mode", ["exact", "with_overrides", "from_checkpoint"] as const);
  const overrides: Record<string, ReplayOverride> = {};
  const map = body.reader("override");
  for (const key of Object.keys(map?.value ?? {})) {
    const entry = map?.reader(key);
    if (entry) overrides[key] = overrideFrom(entry);
  }
  const metadata: JsonObject | undefined = body.object("metadata");
  const reason = body.string("reason") ?? "";
  const checkpointId = body.string("checkpoint_id") ?? "";
  const checkpointEventId = body.string("checkpoint_event_id") ?? "";
  // Opt-in: memory reads see what the memory holds now, not what the source read.
  const refreshMemory = body.boolean("refresh_memory") ?? false;
  if (mode === "from_checkpoint" && checkpointId === "" && checkpointEventId === "") {
    throw errors.invalid(
      "mode from_checkpoint needs checkpoint_id or checkpoint_event_id",
      "checkpoint_id",
    );
  }
  // A source of another workspace is absent (404), before anything else is said about it.
  const source = await visibleTask(call, id);
  // A replay runs the source's agent again.
  ensureAgentAllowed(call.caller, source.agentId, "task_id");
  const { task } = await call.ports.clients.get(TaskService).replayTask(
    {
      taskId: id,
      mode: modes[mode ?? "exact"],
      overrides,
      checkpointId,
      checkpointEventId,
      refreshMemory,
      reason,
      idempotencyKey: call.idempotencyKey,
      ...(metadata ? { metadata } : {}),
    },
    call.options(),
  );
  return accepted(taskToHarn(required(task, "task", "")));
}

/** The replay route (registered in `index.ts`). */
export const replayRoutes: readonly RouteSpec[] = [
  {
    method: "POST",
    path: "/v1/tasks/{task_id}/replay",
    scope: "tasks:write",
    write: true,
    handle: replayTask,
  },
];
