/**
 * Credentials of a workspace, managed over REST (scope `keys:admin`):
 *
 *   GET  /v1/api-keys[?workspace_id=&include_revoked=true]   list (no secrets)
 *   POST /v1/api-keys {name, scopes[], actor_id?, workspace_id?, agent_ids?}
 *                                         create; the key is in the answer, once;
 *                                         `agent_ids` restricts it to those agents
 *   GET  /v1/api-keys/{key_id}
 *   POST /v1/api-keys/{key_id}/revoke     stops working at once, on every replica
 *
 * and the same under `/v1/oauth-clients` for OAuth2 clients (`client_secret`
 * shown once). A caller grants only what it holds itself (no escalation) and
 * manages only credentials whose scopes it holds; another workspace's
 * credentials are 404 unless the caller is an admin key.
 *
 * Creating a credential is not replayed by `Idempotency-Key`: the stored
 * response would hold the secret, which is never stored. A retried create
 * makes a second credential; list and revoke the spare.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { errors, TrellisError } from "@trellis/runtime";
import { JsonReader } from "../../domain/json-input.js";
import { coversGrants, isAdmin, isGrantableScope, isScope } from "../../domain/scopes.js";
import { grantableAgentPolicy, parseAgentIds } from "../../policy/agent-policy.js";
import type { ApiKeyRecord } from "../../store/key-store.js";
import type { OAuthClientRecord } from "../../store/oauth-client-store.js";
import type { RestCall } from "../context.js";
import { jsonResponse, type RestResponse } from "../io.js";
import { ok, param, queryString, queryWorkspace, workspaceOf } from "./common.js";
import { okPage } from "./paging.js";

const labelPattern = /^[\x20-\x7e]{1,100}$/;
const noStore = { "cache-control": "no-store" };

function label(body: JsonReader, key: string, fallback?: string): string {
  const value = body.string(key) ?? fallback;
  if (value === undefined) return body.requiredString(key);
  if (!labelPattern.test(value) || value.trim() === "") {
    throw errors.invalid(`${key} must be 1–100 printable characters`, key);
  }
  return value;
}

function scopesFrom(body: JsonReader, valid: (s: string) => boolean, what: string): string[] {
  const scopes = body.strings("scopes");
  if (scopes === undefined || scopes.length === 0) {
    throw errors.invalid("scopes must list at least one scope", "scopes");
  }
  const bad = scopes.find((s) => !valid(s));
  if (bad !== undefined) {
    throw errors.invalid(`${JSON.stringify(bad.slice(0, 64))} is not ${what}`, "scopes");
  }
  return [...new Set(scopes)];
}

/**
 * `agent_ids` of a new credential (its agent policy, `policy/agent-policy.ts`):
 * absent = every agent, unless the creator is restricted itself.
 */
function agentIdsFrom(call: RestCall, body: JsonReader): readonly string[] | undefined {
  return grantableAgentPolicy(call.caller, parseAgentIds(body.strings("agent_ids")));
}

/** Persist the agent policy of a credential just made; fails closed (revokes it) if that fails. */
async function restrict(
  call: RestCall,
  credential: string,
  agentIds: readonly string[] | undefined,
  revoke: () => Promise<unknown>,
): Promise<void> {
  if (agentIds === undefined) return;
  const store = call.ports.agentPolicies;
  try {
    if (store === undefined) throw errors.unavailable("agent policies");
    await store.set(credential, agentIds);
  } catch (error) {
    await revoke();
    throw error;
  }
}

async function agentIdsOf(call: RestCall, credential: string): Promise<string[] | null> {
  const policy = await call.ports.agentPolicies?.get(credential);
  return policy ? [...policy.agentIds] : null;
}

function noEscalation(call: RestCall, scopes: readonly string[]): void {
  if (!coversGrants(call.caller.scopes, scopes)) {
    throw new TrellisError({
      reason: "permission_denied",
      message: "a credential cannot be given scopes its creator does not hold",
      param: "scopes",
    });
  }
}

function includeRevoked(call: RestCall): boolean {
  const raw = queryString(call, "include_revoked");
  if (raw === undefined || raw === "false") return false;
  if (raw === "true") return true;
  throw errors.invalid("include_revoked must be true or false", "include_revoked");
}

/** Whether the caller may see a credential of `workspaceId` (else it is absent). */
function visible(call: RestCall, workspaceId: string): boolean {
  return workspaceId === call.caller.workspaceId || isAdmin(call.caller.scopes);
}

function iso(date: Date | undefined): string | null {
  return date === undefined ? null : date.toISOString();
}

/** An API key as a resource (never its secret, except `key` right after creation). */
export function apiKeyJson(record: ApiKeyRecord, key?: string): JsonObject {
  return {
    id: record.id,
    object: "api_key",
    created_at: record.createdAt.toISOString(),
    updated_at: (record.revokedAt ?? record.createdAt).toISOString(),
    metadata: {},
    name: record.name,
    prefix: record.prefix,
    actor_id: record.actorId,
    workspace_id: record.workspaceId,
    scopes: [...record.scopes],
    revoked_at: iso(record.revokedAt),
    ...(key === undefined ? {} : { key }),
  };
}

/** An OAuth client as a resource (`client_secret` only right after registration). */
export function oauthClientJson(record: OAuthClientRecord, clientSecret?: string): JsonObject {
  return {
    id: record.id,
    object: "oauth_client",
    created_at: record.createdAt.toISOString(),
    updated_at: (record.revokedAt ?? record.createdAt).toISOString(),
    metadata: {},
    client_id: record.id,
    name: record.name,
    workspace_id: record.workspaceId,
    scopes: [...record.scopes],
    created_by: record.createdBy,
    revoked_at: iso(record.revokedAt),
    ...(clientSecret === undefined ? {} : { client_secret: clientSecret }),
  };
}

export async function listApiKeys(call: RestCall): Promise<RestResponse> {
  const workspaceId = queryWorkspace(call);
  const records = await call.ports.keys.list({ workspaceId, includeRevoked: includeRevoked(call) });
  return okPage(records, apiKeyJson);
}

export async function createApiKey(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const name = label(body, "name");
  const scopes = scopesFrom(body, isGrantableScope, "a known scope, <area>:* or *");
  noEscalation(call, scopes);
  const agentIds = agentIdsFrom(call, body);
  const workspaceId = workspaceOf(call, body.string("workspace_id"));
  const created = await call.ports.keys.create({
    name,
    actorId: label(body, "actor_id", name),
    workspaceId,
    scopes,
  });
  await restrict(call, `api_key:${created.record.id}`, agentIds, () =>
    call.ports.keys.revoke(created.record.id),
  );
  call.ports.logger.info("api key created", {
    request_id: call.requestId,
    key_id: created.record.id,
    workspace_id: workspaceId,
    by: call.caller.actorId,
  });
  return jsonResponse(
    201,
    { ...apiKeyJson(created.record, created.key), agent_ids: agentIds ? [...agentIds] : null },
    noStore,
  );
}

async function visibleKey(call: RestCall): Promise<ApiKeyRecord> {
  const id = param(call, "key_id");
  const record = await call.ports.keys.get(id);
  if (record === undefined || !visible(call, record.workspaceId)) {
    throw errors.notFound("api_key", id);
  }
  return record;
}

export async function getApiKey(call: RestCall): Promise<RestResponse> {
  const record = await visibleKey(call);
  return ok({ ...apiKeyJson(record), agent_ids: await agentIdsOf(call, `api_key:${record.id}`) });
}

export async function revokeApiKey(call: RestCall): Promise<RestResponse> {
  const record = await visibleKey(call);
  noEscalation(call, record.scopes);
  if (record.revokedAt === undefined) {
    await call.ports.keys.revoke(record.id);
    call.ports.logger.info("api key revoked", {
      request_id: call.requestId,
      key_id: record.id,
      workspace_id: record.workspaceId,
      by: call.caller.actorId,
    });
  }
  return ok(apiKeyJson((await call.ports.keys.get(record.id)) ?? record));
}

export async function listOAuthClients(call: RestCall): Promise<RestResponse> {
  const workspaceId = queryWorkspace(call);
  const records = await call.ports.oauthClients.list({
    workspaceId,
    includeRevoked: includeRevoked(call),
  });
  return okPage(records, oauthClientJson);
}

export async function createOAuthClient(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const name = label(body, "name");
  const scopes = scopesFrom(body, isScope, "a known scope (OAuth clients take named scopes only)");
  noEscalation(call, scopes);
  const agentIds = agentIdsFrom(call, body);
  const workspaceId = workspaceOf(call, body.string("workspace_id"));
  const created = await call.ports.oauthClients.create({
    name,
    workspaceId,
    scopes,
    createdBy: call.caller.actorId,
  });
  await restrict(call, `oauth_client:${created.record.id}`, agentIds, () =>
    call.ports.oauthClients.revoke(created.record.id),
  );
  call.ports.logger.info("oauth client registered", {
    request_id: call.requestId,
    client_id: created.record.id,
    workspace_id: workspaceId,
    by: call.caller.actorId,
  });
  return jsonResponse(
    201,
    {
      ...oauthClientJson(created.record, created.clientSecret),
      agent_ids: agentIds ? [...agentIds] : null,
    },
    noStore,
  );
}

async function visibleClient(call: RestCall): Promise<OAuthClientRecord> {
  const id = param(call, "client_id");
  const record = await call.ports.oauthClients.get(id);
  if (record === undefined || !visible(call, record.workspaceId)) {
    throw errors.notFound("oauth_client", id);
  }
  return record;
}

export async function getOAuthClient(call: RestCall): Promise<RestResponse> {
  const record = await visibleClient(call);
  return ok({
    ...oauthClientJson(record),
    agent_ids: await agentIdsOf(call, `oauth_client:${record.id}`),
  });
}

export async function revokeOAuthClient(call: RestCall): Promise<RestResponse> {
  const record = await visibleClient(call);
  noEscalation(call, record.scopes);
  if (record.revokedAt === undefined) {
    await call.ports.oauthClients.revoke(record.id);
    call.ports.logger.info("oauth client revoked", {
      request_id: call.requestId,
      client_id: record.id,
      workspace_id: record.workspaceId,
      by: call.caller.actorId,
    });
  }
  return ok(oauthClientJson((await call.ports.oauthClients.get(record.id)) ?? record));
}
