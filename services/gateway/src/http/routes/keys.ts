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
import type { RestCall, RouteSpec } from "../context.js";
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

/** What the routes read of a stored credential (an API key or an OAuth client). */
interface CredentialRecord {
  id: string;
  workspaceId: string;
  scopes: readonly string[];
  revokedAt: Date | undefined;
}

/** Where one kind of credential lives, as the routes use it. */
interface CredentialStore<R extends CredentialRecord> {
  get(id: string): Promise<R | undefined>;
  list(options: { workspaceId: string; includeRevoked: boolean }): Promise<R[]>;
  revoke(id: string): Promise<boolean>;
}

/** What a create request grants, checked: no scope the creator does not hold. */
interface Grant {
  name: string;
  scopes: string[];
  workspaceId: string;
}

/** One kind of credential the routes manage: the same four routes, its own store and JSON. */
interface CredentialKind<R extends CredentialRecord> {
  /** Its `object` (and 404 object), also the prefix of its agent policy (`api_key:<id>`). */
  object: "api_key" | "oauth_client";
  /** The collection path; one credential is `<path>/{<param>}`. */
  path: string;
  param: string;
  /** The log field of its id and its log messages. */
  logId: string;
  logged: { created: string; revoked: string };
  /** The scopes it may be given, and how a refused one is described. */
  grantable: (scope: string) => boolean;
  grantableText: string;
  store(call: RestCall): CredentialStore<R>;
  /** Make one: its record and its secret (shown once). */
  create(call: RestCall, body: JsonReader, grant: Grant): Promise<{ record: R; secret: string }>;
  /** As a resource, with its secret only right after creation. */
  json(record: R, secret?: string): JsonObject;
}

function logged<R extends CredentialRecord>(
  call: RestCall,
  kind: CredentialKind<R>,
  message: string,
  id: string,
  workspaceId: string,
): void {
  call.ports.logger.info(message, {
    request_id: call.requestId,
    [kind.logId]: id,
    workspace_id: workspaceId,
    by: call.caller.actorId,
  });
}

async function listCredentials<R extends CredentialRecord>(
  call: RestCall,
  kind: CredentialKind<R>,
): Promise<RestResponse> {
  const workspaceId = queryWorkspace(call);
  const records = await kind
    .store(call)
    .list({ workspaceId, includeRevoked: includeRevoked(call) });
  return okPage(records, (record) => kind.json(record));
}

async function createCredential<R extends CredentialRecord>(
  call: RestCall,
  kind: CredentialKind<R>,
): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const name = label(body, "name");
  const scopes = scopesFrom(body, kind.grantable, kind.grantableText);
  noEscalation(call, scopes);
  const agentIds = agentIdsFrom(call, body);
  const workspaceId = workspaceOf(call, body.string("workspace_id"));
  const { record, secret } = await kind.create(call, body, { name, scopes, workspaceId });
  await restrict(call, `${kind.object}:${record.id}`, agentIds, () =>
    kind.store(call).revoke(record.id),
  );
  logged(call, kind, kind.logged.created, record.id, workspaceId);
  return jsonResponse(
    201,
    { ...kind.json(record, secret), agent_ids: agentIds ? [...agentIds] : null },
    noStore,
  );
}

/** The credential a path names, if the caller may see it (404 otherwise). */
async function visibleCredential<R extends CredentialRecord>(
  call: RestCall,
  kind: CredentialKind<R>,
): Promise<R> {
  const id = param(call, kind.param);
  const record = await kind.store(call).get(id);
  if (record === undefined || !visible(call, record.workspaceId)) {
    throw errors.notFound(kind.object, id);
  }
  return record;
}

async function getCredential<R extends CredentialRecord>(
  call: RestCall,
  kind: CredentialKind<R>,
): Promise<RestResponse> {
  const record = await visibleCredential(call, kind);
  return ok({
    ...kind.json(record),
    agent_ids: await agentIdsOf(call, `${kind.object}:${record.id}`),
  });
}

async function revokeCredential<R extends CredentialRecord>(
  call: RestCall,
  kind: CredentialKind<R>,
): Promise<RestResponse> {
  const record = await visibleCredential(call, kind);
  noEscalation(call, record.scopes);
  const store = kind.store(call);
  if (record.revokedAt === undefined) {
    await store.revoke(record.id);
    logged(call, kind, kind.logged.revoked, record.id, record.workspaceId);
  }
  return ok(kind.json((await store.get(record.id)) ?? record));
}

/** The routes of one kind of credential: list, create, get, revoke (all `keys:admin`). */
function credentialRoutes<R extends CredentialRecord>(kind: CredentialKind<R>): RouteSpec[] {
  const one = `${kind.path}/{${kind.param}}`;
  return [
    {
      method: "GET",
      path: kind.path,
      scope: "keys:admin",
      handle: (c) => listCredentials(c, kind),
    },
    {
      method: "POST",
      path: kind.path,
      scope: "keys:admin",
      handle: (c) => createCredential(c, kind),
    },
    { method: "GET", path: one, scope: "keys:admin", handle: (c) => getCredential(c, kind) },
    {
      method: "POST",
      path: `${one}/revoke`,
      scope: "keys:admin",
      handle: (c) => revokeCredential(c, kind),
    },
  ];
}

const apiKeys: CredentialKind<ApiKeyRecord> = {
  object: "api_key",
  path: "/v1/api-keys",
  param: "key_id",
  logId: "key_id",
  logged: { created: "api key created", revoked: "api key revoked" },
  grantable: isGrantableScope,
  grantableText: "a known scope, <area>:* or *",
  store: (call) => call.ports.keys,
  async create(call, body, { name, scopes, workspaceId }) {
    const created = await call.ports.keys.create({
      name,
      actorId: label(body, "actor_id", name),
      workspaceId,
      scopes,
    });
    return { record: created.record, secret: created.key };
  },
  json: apiKeyJson,
};

const oauthClients: CredentialKind<OAuthClientRecord> = {
  object: "oauth_client",
  path: "/v1/oauth-clients",
  param: "client_id",
  logId: "client_id",
  logged: { created: "oauth client registered", revoked: "oauth client revoked" },
  grantable: isScope,
  grantableText: "a known scope (OAuth clients take named scopes only)",
  store: (call) => call.ports.oauthClients,
  async create(call, _body, { name, scopes, workspaceId }) {
    const created = await call.ports.oauthClients.create({
      name,
      workspaceId,
      scopes,
      createdBy: call.caller.actorId,
    });
    return { record: created.record, secret: created.clientSecret };
  },
  json: oauthClientJson,
};

/** The credential routes (registered in `index.ts`): API keys, then OAuth clients. */
export const keyRoutes: readonly RouteSpec[] = [
  ...credentialRoutes(apiKeys),
  ...credentialRoutes(oauthClients),
];
