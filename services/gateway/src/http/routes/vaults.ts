/**
 * Vaults (`/v1/vaults`, Harn v1 "Vault"): metadata and the names of their
 * secrets, forwarded to the adapters service's `VaultService`, which keeps
 * them. Secret values are write-only (`PUT …/secrets/{name}`): no answer
 * carries one. `workspace_id: null` on create makes a tenant-global vault
 * (admin key only). Another workspace's vault is 404. `POST /v1/vaults/{id}`
 * sets the fields its body has (`capabilities`, `allowed_agent_ids`,
 * `metadata`); `DELETE` removes the vault with its secrets.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { type SecretInfo, type Vault, VaultService } from "@trellis/contracts/adapters";
import { errors } from "@trellis/runtime";
import { storedResourceHead, timestampJson } from "../../domain/harn-json.js";
import { JsonReader } from "../../domain/json-input.js";
import type { RestCall, RouteSpec } from "../context.js";
import { jsonResponse, type RestResponse } from "../io.js";
import { created, ok, param, queryWorkspace, required, workspaceOf } from "./common.js";
import { okPage, pageOf } from "./paging.js";

const noStore = { "cache-control": "no-store" };

function vaultJson(vault: Vault): JsonObject {
  return {
    ...storedResourceHead("vault", vault),
    provider: vault.provider,
    capabilities: [...vault.capabilities],
    allowed_agent_ids: [...vault.allowedAgentIds],
  };
}

function secretJson(vaultId: string, secret: SecretInfo): JsonObject {
  return {
    object: "vault_secret",
    vault_id: vaultId,
    name: secret.name,
    size_bytes: secret.sizeBytes,
    created_at: timestampJson(secret.createdAt),
    updated_at: timestampJson(secret.updatedAt),
  };
}

function vaults(call: RestCall) {
  return call.ports.clients.get(VaultService);
}

async function listVaults(call: RestCall): Promise<RestResponse> {
  const response = await vaults(call).listVaults(
    { workspaceId: queryWorkspace(call), ...pageOf(call) },
    call.options(),
  );
  return okPage(response.vaults, vaultJson, response.nextPageToken);
}

async function createVault(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  // An explicit null: a tenant-global vault (the adapters service requires an admin key).
  const tenantGlobal = body.value.workspace_id === null;
  const metadata = body.object("metadata");
  const response = await vaults(call).createVault(
    {
      vaultId: body.string("id") ?? "",
      workspaceId: tenantGlobal ? "" : workspaceOf(call, body.string("workspace_id")),
      tenantGlobal,
      provider: body.requiredString("provider"),
      capabilities: body.strings("capabilities") ?? [],
      allowedAgentIds: body.strings("allowed_agent_ids") ?? [],
      ...(metadata ? { metadata } : {}),
    },
    call.options(),
  );
  return created(vaultJson(required(response.vault, "vault", "")));
}

async function getVault(call: RestCall): Promise<RestResponse> {
  const id = param(call, "vault_id");
  const { vault } = await vaults(call).getVault({ vaultId: id }, call.options());
  return ok(vaultJson(required(vault, "vault", id)));
}

/** The fields an update may set, by their JSON (and proto) names. */
const updatable = ["capabilities", "allowed_agent_ids", "metadata"] as const;

async function updateVault(call: RestCall): Promise<RestResponse> {
  const id = param(call, "vault_id");
  const body = JsonReader.body(call.body);
  const unknown = Object.keys(body.value).find(
    (key) => !(updatable as readonly string[]).includes(key),
  );
  if (unknown !== undefined) {
    throw errors.invalid(
      `${JSON.stringify(unknown)} cannot be updated; fields: ${updatable.join(", ")}`,
      unknown,
    );
  }
  const paths = updatable.filter((key) => body.value[key] !== undefined);
  if (paths.length === 0) {
    throw errors.invalid(`give at least one field to update: ${updatable.join(", ")}`);
  }
  const metadata = body.object("metadata");
  const { vault } = await vaults(call).updateVault(
    {
      vaultId: id,
      capabilities: body.strings("capabilities") ?? [],
      allowedAgentIds: body.strings("allowed_agent_ids") ?? [],
      ...(metadata ? { metadata } : {}),
      updateMask: { paths },
    },
    call.options(),
  );
  return ok(vaultJson(required(vault, "vault", id)));
}

async function deleteVault(call: RestCall): Promise<RestResponse> {
  const id = param(call, "vault_id");
  await vaults(call).deleteVault({ vaultId: id }, call.options());
  return ok({ object: "vault", id, deleted: true });
}

async function listSecrets(call: RestCall): Promise<RestResponse> {
  const vaultId = param(call, "vault_id");
  const response = await vaults(call).listSecrets({ vaultId }, call.options());
  return okPage(response.secrets, (s) => secretJson(vaultId, s));
}

async function putSecret(call: RestCall): Promise<RestResponse> {
  const vaultId = param(call, "vault_id");
  const name = param(call, "name");
  const body = JsonReader.body(call.body);
  const response = await vaults(call).putSecret(
    { vaultId, name, value: body.requiredString("value") },
    call.options(),
  );
  return jsonResponse(200, secretJson(vaultId, required(response.secret, "secret", name)), noStore);
}

async function deleteSecret(call: RestCall): Promise<RestResponse> {
  const vaultId = param(call, "vault_id");
  const name = param(call, "name");
  await vaults(call).deleteSecret({ vaultId, name }, call.options());
  return ok({ object: "vault_secret", vault_id: vaultId, name, deleted: true });
}

export const vaultRoutes: readonly RouteSpec[] = [
  { method: "GET", path: "/v1/vaults", scope: "vaults:read", handle: listVaults },
  { method: "POST", path: "/v1/vaults", scope: "vaults:write", write: true, handle: createVault },
  { method: "GET", path: "/v1/vaults/{vault_id}", scope: "vaults:read", handle: getVault },
  {
    method: "POST",
    path: "/v1/vaults/{vault_id}",
    scope: "vaults:write",
    write: true,
    handle: updateVault,
  },
  { method: "DELETE", path: "/v1/vaults/{vault_id}", scope: "vaults:write", handle: deleteVault },
  {
    method: "GET",
    path: "/v1/vaults/{vault_id}/secrets",
    scope: "vaults:read",
    handle: listSecrets,
  },
  // Not replayed by Idempotency-Key: the request carries the secret value.
  {
    method: "PUT",
    path: "/v1/vaults/{vault_id}/secrets/{name}",
    scope: "vaults:write",
    handle: putSecret,
  },
  {
    method: "DELETE",
    path: "/v1/vaults/{vault_id}/secrets/{name}",
    scope: "vaults:write",
    handle: deleteSecret,
  },
];
