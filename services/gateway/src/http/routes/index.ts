/** The route table of the REST surface (paths from the Harn OpenAPI document). */
import type { RouteSpec } from "../context.js";
import {
  getArtifact,
  getArtifactContent,
  getOutcome,
  listArtifacts,
  listOutcomes,
  registerArtifact,
} from "./artifacts.js";
import { branchRoutes } from "./branches.js";
import { ok, param } from "./common.js";
import { connectorRoutes } from "./connectors.js";
import { agentCard, discoveryJson, receiptsAvailable } from "./discovery.js";
import { eventReadRoutes, getEvent, queriedEvents, sessionEvents, taskEvents } from "./events.js";
import { healthRoutes } from "./health.js";
import { keyRoutes } from "./keys.js";
import { memoryRoutes } from "./memories.js";
import { quotaRoutes } from "./quotas.js";
import { receiptRoutes } from "./receipts.js";
import { replayRoutes } from "./replay.js";
import {
  appendSessionMessage,
  closeSession,
  createSession,
  forkSession,
  getMessage,
  getSession,
  listSessionMessages,
  listSessions,
  truncateSession,
} from "./sessions.js";
import { skillRoutes } from "./skills.js";
import { appendTaskMessage, cancelTask, getTask, listTasks, submitTask } from "./tasks.js";
import { uiEventRoutes } from "./ui-events.js";
import { uiHealthRoutes } from "./ui-health.js";
import { uiSessionRoutes } from "./ui-session.js";
import { vaultRoutes } from "./vaults.js";
import { webhookRoutes } from "./webhooks.js";
import { webSocketRoutes } from "./websocket.js";
import {
  archiveWorkspace,
  createPersona,
  createWorkspace,
  getPersona,
  getWorkspace,
  listPersonas,
  listWorkspaces,
  updateWorkspace,
} from "./workspaces.js";

/**
 * Every REST route of the gateway. Who may call each one is its `scope`, the
 * one declaration of its rule (`auth/scope-table.ts` says what a rule means;
 * `rules.ts` is the table derived from these).
 */
export const restRoutes: readonly RouteSpec[] = [
  {
    method: "GET",
    path: "/v1",
    scope: "public",
    handle: async (call) => ok(discoveryJson({ receipts: await receiptsAvailable(call) })),
  },
  { method: "GET", path: "/v1/agent-card", scope: "public", handle: agentCard },
  ...healthRoutes,

  { method: "GET", path: "/v1/workspaces", scope: "workspaces:read", handle: listWorkspaces },
  { method: "POST", path: "/v1/workspaces", scope: "admin", write: true, handle: createWorkspace },
  {
    method: "GET",
    path: "/v1/workspaces/{workspace_id}",
    scope: "workspaces:read",
    handle: getWorkspace,
  },
  {
    method: "PATCH",
    path: "/v1/workspaces/{workspace_id}",
    scope: "admin",
    write: true,
    handle: updateWorkspace,
  },
  {
    method: "POST",
    path: "/v1/workspaces/{workspace_id}/archive",
    scope: "admin",
    handle: archiveWorkspace,
  },

  { method: "GET", path: "/v1/personas", scope: "agents:read", handle: listPersonas },
  {
    method: "POST",
    path: "/v1/personas",
    scope: "agents:write",
    write: true,
    handle: createPersona,
  },
  { method: "GET", path: "/v1/personas/{persona_id}", scope: "agents:read", handle: getPersona },

  { method: "GET", path: "/v1/sessions", scope: "sessions:read", handle: listSessions },
  {
    method: "POST",
    path: "/v1/sessions",
    scope: "sessions:write",
    write: true,
    handle: createSession,
  },
  { method: "GET", path: "/v1/sessions/{session_id}", scope: "sessions:read", handle: getSession },
  {
    method: "POST",
    path: "/v1/sessions/{session_id}/close",
    scope: "sessions:write",
    write: true,
    handle: closeSession,
  },
  {
    method: "POST",
    path: "/v1/sessions/{session_id}/fork",
    scope: "sessions:write",
    write: true,
    handle: forkSession,
  },
  {
    method: "POST",
    path: "/v1/sessions/{session_id}/truncate",
    scope: "sessions:write",
    write: true,
    handle: truncateSession,
  },
  {
    method: "GET",
    path: "/v1/sessions/{session_id}/messages",
    scope: "sessions:read",
    handle: listSessionMessages,
  },
  {
    method: "POST",
    path: "/v1/sessions/{session_id}/messages",
    scope: "sessions:write",
    write: true,
    handle: appendSessionMessage,
  },
  {
    method: "GET",
    path: "/v1/sessions/{session_id}/tasks",
    scope: "tasks:read",
    handle: (call) => listTasks(call, param(call, "session_id")),
  },
  {
    method: "POST",
    path: "/v1/sessions/{session_id}/tasks",
    scope: "tasks:write",
    write: true,
    handle: (call) => submitTask(call, param(call, "session_id")),
  },
  ...eventReadRoutes(
    "/v1/sessions/{session_id}/events",
    "/v1/sessions/{session_id}/events/stream",
    sessionEvents,
  ),

  {
    method: "GET",
    path: "/v1/tasks",
    scope: "tasks:read",
    handle: (call) => listTasks(call, undefined),
  },
  {
    method: "POST",
    path: "/v1/tasks",
    scope: "tasks:write",
    write: true,
    handle: (call) => submitTask(call, undefined),
  },
  { method: "GET", path: "/v1/tasks/{task_id}", scope: "tasks:read", handle: getTask },
  {
    method: "POST",
    path: "/v1/tasks/{task_id}/cancel",
    scope: "tasks:write",
    write: true,
    handle: cancelTask,
  },
  {
    method: "POST",
    path: "/v1/tasks/{task_id}/messages",
    scope: "tasks:write",
    write: true,
    handle: appendTaskMessage,
  },
  ...eventReadRoutes("/v1/tasks/{task_id}/events", "/v1/tasks/{task_id}/stream", taskEvents),

  { method: "GET", path: "/v1/messages/{message_id}", scope: "sessions:read", handle: getMessage },

  ...eventReadRoutes("/v1/events", "/v1/events/stream", queriedEvents),
  { method: "GET", path: "/v1/events/{event_id}", scope: "events:read", handle: getEvent },

  { method: "GET", path: "/v1/artifacts", scope: "artifacts:read", handle: listArtifacts },
  {
    method: "POST",
    path: "/v1/artifacts",
    scope: "artifacts:write",
    write: true,
    handle: registerArtifact,
  },
  {
    method: "GET",
    path: "/v1/artifacts/{artifact_id}",
    scope: "artifacts:read",
    handle: getArtifact,
  },
  {
    method: "GET",
    path: "/v1/artifacts/{artifact_id}/content",
    scope: "artifacts:read",
    handle: getArtifactContent,
  },

  ...replayRoutes,

  // Receipts: served by the receipts service's own REST handler, behind the gateway's checks.
  ...receiptRoutes(),

  { method: "GET", path: "/v1/outcomes", scope: "tasks:read", handle: listOutcomes },
  { method: "GET", path: "/v1/outcomes/{outcome_id}", scope: "tasks:read", handle: getOutcome },

  ...uiEventRoutes,

  // Quotas and rate limits of the caller's workspace (quota/limits.ts).
  ...quotaRoutes,

  // The session's WebSocket channel (the upgrade itself is ws/upgrade.ts).
  ...webSocketRoutes,

  // Signed webhook deliveries of task / session events (webhooks/).
  ...webhookRoutes,
  ...vaultRoutes,
  ...memoryRoutes,
  ...skillRoutes,
  ...uiHealthRoutes,
  ...uiSessionRoutes,
  // Harn Extended: branches (recorded session forks) and connectors.
  ...branchRoutes,
  ...connectorRoutes,

  // Credentials of a workspace (not replayed by Idempotency-Key: see keys.ts).
  ...keyRoutes,
];
