/** Workspaces and personas (Trellis agents). */
import { Code, ConnectError } from "@connectrpc/connect";
import { AgentService, WorkspaceService } from "@trellis/contracts/tasks";
import { TrellisError } from "@trellis/runtime";
import { parseAutonomyTier, parseReceiptPolicy } from "../../domain/harn-input.js";
import { agentToPersona, workspaceToHarn } from "../../domain/harn-json.js";
import { JsonReader } from "../../domain/json-input.js";
import { isAdmin } from "../../domain/scopes.js";
import { ensureAgentAllowed, usableAgents } from "../../policy/agent-policy.js";
import type { RestCall } from "../context.js";
import type { RestResponse } from "../io.js";
import {
  created,
  ensureVisible,
  ok,
  param,
  queryWorkspace,
  required,
  visible,
  workspaceOf,
} from "./common.js";
import { okPage, pageOf } from "./paging.js";

export async function listWorkspaces(call: RestCall): Promise<RestResponse> {
  const page = pageOf(call);
  const client = call.ports.clients.get(WorkspaceService);
  if (!isAdmin(call.caller.scopes)) {
    // Its own workspace only; a credential may name one that was never created.
    const workspace = await client
      .getWorkspace({ workspaceId: call.caller.workspaceId }, call.options())
      .then(
        (r) => r.workspace,
        (error: unknown) => {
          if (ConnectError.from(error).code === Code.NotFound) return undefined;
          throw error;
        },
      );
    return okPage(workspace ? [workspace] : [], workspaceToHarn);
  }
  const response = await client.listWorkspaces(page, call.options());
  return okPage(response.workspaces, workspaceToHarn, response.nextPageToken);
}

export async function createWorkspace(call: RestCall): Promise<RestResponse> {
  if (!isAdmin(call.caller.scopes)) {
    throw new TrellisError({
      reason: "permission_denied",
      message: "creating workspaces needs an admin API key",
    });
  }
  const body = JsonReader.body(call.body);
  const metadata = body.object("metadata");
  // The tasks service creates workspaces for unconfined callers only: the
  // admin key (checked here too, for a clear message) or an internal call.
  const response = await call.ports.clients.get(WorkspaceService).createWorkspace(
    {
      name: body.requiredString("name"),
      root: body.string("root") ?? "",
      workspaceId: body.string("id") ?? "",
      idempotencyKey: call.idempotencyKey,
      ...(metadata ? { metadata } : {}),
    },
    call.options(),
  );
  return created(workspaceToHarn(required(response.workspace, "workspace", "")));
}

export async function getWorkspace(call: RestCall): Promise<RestResponse> {
  const id = param(call, "workspace_id");
  ensureVisible(call, id, "workspace", id);
  const { workspace } = await call.ports.clients
    .get(WorkspaceService)
    .getWorkspace({ workspaceId: id }, call.options());
  return ok(workspaceToHarn(required(workspace, "workspace", id)));
}

/** Harn fields of a workspace update that Trellis workspaces do not carry. */
const notSettable = ["capabilities", "quota_id"] as const;

/** `PATCH /v1/workspaces/{id}`: a new name, metadata merged (null removes a key). */
export async function updateWorkspace(call: RestCall): Promise<RestResponse> {
  const id = param(call, "workspace_id");
  const body = JsonReader.body(call.body);
  const unsupported = notSettable.find((field) => body.value[field] !== undefined);
  if (unsupported !== undefined) {
    throw new TrellisError({
      reason: "not_implemented",
      message: `${unsupported} of a workspace cannot be set on this Trellis; name and metadata can`,
      param: unsupported,
    });
  }
  const name = body.string("name");
  const metadata = body.object("metadata");
  const { workspace } = await call.ports.clients.get(WorkspaceService).updateWorkspace(
    {
      workspaceId: id,
      ...(name !== undefined ? { name } : {}),
      ...(metadata ? { metadata } : {}),
    },
    call.options(),
  );
  return ok(workspaceToHarn(required(workspace, "workspace", id)));
}

/** `POST /v1/workspaces/{id}/archive` (Trellis): readable still, no new sessions. */
export async function archiveWorkspace(call: RestCall): Promise<RestResponse> {
  const id = param(call, "workspace_id");
  const { workspace } = await call.ports.clients
    .get(WorkspaceService)
    .archiveWorkspace({ workspaceId: id }, call.options());
  return ok(workspaceToHarn(required(workspace, "workspace", id)));
}

export async function listPersonas(call: RestCall): Promise<RestResponse> {
  const response = await call.ports.clients
    .get(AgentService)
    .listAgents({ workspaceId: queryWorkspace(call), ...pageOf(call) }, call.options());
  // A credential restricted to some agents sees only those.
  const agents = usableAgents(call.caller, response.agents);
  return okPage(agents, agentToPersona, response.nextPageToken);
}

export async function createPersona(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const definition = body.object("definition");
  const metadata = body.object("metadata");
  const response = await call.ports.clients.get(AgentService).createAgent(
    {
      agent: {
        id: body.string("id") ?? "",
        workspaceId: workspaceOf(call, body.string("workspace_id")),
        name: body.requiredString("name"),
        version: body.string("version") ?? "",
        description: body.string("description") ?? "",
        backend: body.string("entry_workflow") ?? body.string("backend") ?? "",
        tools: body.strings("tools") ?? [],
        autonomyTier: parseAutonomyTier(body),
        receiptPolicy: parseReceiptPolicy(body),
        safeToRetry: body.boolean("safe_to_retry") ?? false,
        ...(definition ? { definition } : {}),
        ...(metadata ? { metadata } : {}),
      },
      idempotencyKey: call.idempotencyKey,
    },
    call.options(),
  );
  return created(agentToPersona(required(response.agent, "persona", "")));
}

export async function getPersona(call: RestCall): Promise<RestResponse> {
  const id = param(call, "persona_id");
  ensureAgentAllowed(call.caller, id, "persona_id");
  const { agent } = await call.ports.clients
    .get(AgentService)
    .getAgent({ agentId: id }, call.options());
  return ok(agentToPersona(visible(call, agent, "persona", id)));
}
