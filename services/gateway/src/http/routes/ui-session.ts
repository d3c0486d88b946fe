/**
 * `GET /v1/ui/sessions/{session_id}`: session detail for operators (spec
 * `003`, "Session Detail And Resume Contract") — the session, its resume
 * points, delegated work, artifacts, health and channel projection. See
 * docs/architecture.md, "Session detail".
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { Session, Task } from "@trellis/contracts/tasks";
import { ArtifactService, TaskService } from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { artifactToHarn, sessionToHarn, taskToHarn } from "../../domain/harn-json.js";
import { healthOfEvaluation, healthPolicyOf } from "../../health/index.js";
import { DEFAULT_CHANNEL_ENVELOPES, MAX_CHANNEL_ENVELOPES } from "../../ui/session-detail.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import { ok, param, visibleSession } from "./common.js";

// Rows per page when reading every task / artifact of a session (the tasks service's maximum).
const PAGE = 1000;
// Delegation lookups (one per task of the session) in flight at once.
const PARALLEL_LOOKUPS = 8;

/** `?envelopes=` (0–1000, default 100). */
function envelopesOf(call: RestCall): number {
  const raw = call.query.get("envelopes");
  if (raw === null || raw === "") return DEFAULT_CHANNEL_ENVELOPES;
  const value = /^\d{1,7}$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value > MAX_CHANNEL_ENVELOPES) {
    throw errors.invalid(
      `envelopes must be an integer between 0 and ${MAX_CHANNEL_ENVELOPES}, got ${JSON.stringify(raw)}`,
      "envelopes",
    );
  }
  return value;
}

/** Every page of a tasks-service list. */
async function allPages<T>(
  page: (pageToken: string) => Promise<{ items: T[]; nextPageToken: string }>,
): Promise<T[]> {
  const out: T[] = [];
  let token = "";
  do {
    const next = await page(token);
    out.push(...next.items);
    token = next.nextPageToken;
  } while (token !== "");
  return out;
}

/** The tasks the session's tasks delegated to (`parent_task_id`), in any session, oldest first. */
async function delegatedTasks(call: RestCall, session: Session): Promise<Task[]> {
  const tasks = call.ports.clients.get(TaskService);
  const own = await allPages(async (pageToken) => {
    const r = await tasks.listTasks(
      { sessionId: session.id, pageSize: PAGE, pageToken },
      call.options(),
    );
    return { items: r.tasks, nextPageToken: r.nextPageToken };
  });
  const children = new Map<string, Task>();
  for (let i = 0; i < own.length; i += PARALLEL_LOOKUPS) {
    const batch = await Promise.all(
      own.slice(i, i + PARALLEL_LOOKUPS).map((parent) =>
        allPages(async (pageToken) => {
          const r = await tasks.listTasks(
            { parentTaskId: parent.id, pageSize: PAGE, pageToken },
            call.options(),
          );
          return { items: r.tasks, nextPageToken: r.nextPageToken };
        }),
      ),
    );
    for (const task of batch.flat()) children.set(task.id, task);
  }
  return [...children.values()].sort(
    (a, b) =>
      Number(a.createdAt?.seconds ?? 0n) - Number(b.createdAt?.seconds ?? 0n) ||
      (a.createdAt?.nanos ?? 0) - (b.createdAt?.nanos ?? 0) ||
      a.id.localeCompare(b.id),
  );
}

function subagentJson(task: Task): JsonObject {
  const t = taskToHarn(task);
  return {
    object: "subagent",
    task_id: task.id,
    parent_task_id: task.parentTaskId,
    session_id: task.sessionId,
    persona_id: t.persona_id ?? null,
    status: t.status ?? null,
    created_at: t.created_at ?? null,
    updated_at: t.updated_at ?? null,
    started_at: t.started_at ?? null,
    completed_at: t.completed_at ?? null,
    canceled_at: t.canceled_at ?? null,
    failure: t.failure ?? null,
  };
}

/** The session's artifacts, newest first, typed (kind, media type), named and sized. */
async function sessionArtifacts(call: RestCall, session: Session): Promise<JsonObject[]> {
  const client = call.ports.clients.get(ArtifactService);
  const artifacts = await allPages(async (pageToken) => {
    const r = await client.listArtifacts(
      { sessionId: session.id, pageSize: PAGE, pageToken },
      call.options(),
    );
    return { items: r.artifacts, nextPageToken: r.nextPageToken };
  });
  // Listed in creation order: the newest is the last.
  return artifacts
    .reverse()
    .map((a) => ({ ...artifactToHarn(a), name: a.name, size_bytes: Number(a.sizeBytes) }));
}

/** `GET /v1/ui/sessions/{session_id}`. */
export async function sessionDetail(call: RestCall): Promise<RestResponse> {
  const envelopes = envelopesOf(call);
  // Visible to the caller (workspace, scope) before anything of it is read or served.
  const session = await visibleSession(call, param(call, "session_id"));
  const policy = healthPolicyOf(session.metadata);
  // The log is read from where this gateway's last read of the session stopped.
  const [{ projection, evaluation }, subagents, artifacts] = await Promise.all([
    call.ports.sessionDetails.read(session, envelopes, ({ detail, health }) => ({
      projection: detail.projection(envelopes),
      evaluation: health.snapshot(Date.now(), policy),
    })),
    delegatedTasks(call, session),
    sessionArtifacts(call, session),
  ]);
  return ok({
    object: "session_detail",
    session: sessionToHarn(session),
    resume_points: projection.resumePoints,
    subagents: subagents.map(subagentJson),
    artifacts,
    health: await healthOfEvaluation(call, policy, evaluation),
    channel: projection.channel,
  });
}

/** The session detail route, registered in the REST route table. */
export const uiSessionRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1/ui/sessions/{session_id}",
    scope: "events:read",
    handle: sessionDetail,
  },
];
