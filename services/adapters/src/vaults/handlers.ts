/**
 * `trellis.adapters.v1.VaultService`. Who sees what: an internal call (no
 * caller) and an admin credential (`*`) every vault; any other caller only
 * its workspace's — another workspace's vault, and a tenant-global one, is
 * `resource_not_found`. Tenant-global vaults are created and written with an
 * admin credential only. No response carries a secret value.
 */
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { vaultGrantsToProto } from "@trellis/adapter-sdk";
import {
  SecretInfoSchema,
  type VaultAccessService,
  type Vault as VaultMessage,
  VaultSchema,
  type VaultService,
} from "@trellis/contracts/adapters";
import {
  isTokenEndpoint,
  OAUTH_GRANT_FIELDS,
  OAUTH_PROVIDER,
  type SecretInfo,
  VAULT_PROVIDER,
  VAULT_PROVIDERS,
  type VaultRecord,
  type VaultStore,
} from "@trellis/execution";
import { type Caller, callerOf } from "@trellis/platform";
import { errors, TrellisError } from "@trellis/runtime";

/** Names of secrets: `[A-Za-z0-9_.-]`, at most 128 characters. */
export const SECRET_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** Largest secret value, in UTF-8 bytes. */
export const MAX_SECRET_BYTES = 64 * 1024;
const MAX_PAGE = 100;

function isAdmin(caller: Caller | undefined): boolean {
  return caller === undefined || caller.scopes.includes("*");
}

function vaultToProto(vault: VaultRecord): VaultMessage {
  return create(VaultSchema, {
    id: vault.id,
    workspaceId: vault.workspaceId ?? "",
    provider: vault.provider,
    capabilities: vault.capabilities,
    allowedAgentIds: vault.allowedAgentIds,
    createdAt: timestampFromDate(vault.createdAt),
    updatedAt: timestampFromDate(vault.updatedAt),
    metadata: vault.metadata,
  });
}

function secretToProto(secret: SecretInfo) {
  return create(SecretInfoSchema, {
    name: secret.name,
    sizeBytes: secret.sizeBytes,
    createdAt: timestampFromDate(secret.createdAt),
    updatedAt: timestampFromDate(secret.updatedAt),
  });
}

/** Capabilities as given (deduplicated), each one the provider has. */
function capabilitiesOf(given: readonly string[], provider: string): string[] {
  const known = VAULT_PROVIDERS[provider] ?? [];
  const capabilities = [...new Set(given)];
  for (const capability of capabilities) {
    if (!known.includes(capability)) {
      throw errors.invalid(
        `unknown capability ${JSON.stringify(capability)} for a ${provider} vault; known: ${known.join(", ")}`,
        "capabilities",
      );
    }
  }
  return capabilities;
}

/**
 * The provider named (default the built-in one). One this service does not
 * implement is `not_implemented` (501 on REST), naming those it does.
 */
function providerOf(given: string): string {
  const provider = given || VAULT_PROVIDER;
  // Not a provider name at all (too long, odd characters): the request is wrong.
  if (!/^[a-z][a-z0-9_.-]{0,63}$/.test(provider)) {
    throw errors.invalid(
      "provider must be a provider name (lower-case letters, digits, _ . -; at most 64)",
      "provider",
    );
  }
  if (VAULT_PROVIDERS[provider] === undefined) {
    throw new TrellisError({
      reason: "not_implemented",
      // The name is the caller's: quoted, and cut short in the message.
      message: `vault provider ${JSON.stringify(provider.slice(0, 64))}${provider.length > 64 ? "…" : ""} is not implemented; supported: ${Object.keys(VAULT_PROVIDERS).join(", ")}`,
      param: "provider",
      metadata: { supported_providers: Object.keys(VAULT_PROVIDERS).join(",") },
      domain: "adapters",
    });
  }
  return provider;
}

/** An OAuth vault keeps only its grant's fields, and its token endpoint is an http(s) URL. */
function checkOAuthSecret(vault: VaultRecord, name: string, value?: string): void {
  if (vault.provider !== OAUTH_PROVIDER) return;
  if (!(OAUTH_GRANT_FIELDS as readonly string[]).includes(name)) {
    throw errors.invalid(
      `an oauth vault keeps its refresh grant only: ${OAUTH_GRANT_FIELDS.join(", ")}`,
      "name",
    );
  }
  if (name === "token_endpoint" && value !== undefined && !isTokenEndpoint(value)) {
    throw errors.invalid("token_endpoint must be an http(s) URL", "value");
  }
}

/** An access policy's agent ids (deduplicated). */
function agentIdsOf(given: readonly string[]): string[] {
  if (given.some((id) => id === "" || id.length > 128)) {
    throw errors.invalid("allowed_agent_ids must be agent ids", "allowed_agent_ids");
  }
  return [...new Set(given)];
}

/** The fields UpdateVault may set (its update_mask paths). */
const UPDATABLE = ["capabilities", "allowed_agent_ids", "metadata"] as const;

function checkSecretName(name: string): void {
  if (!SECRET_NAME.test(name)) {
    throw errors.invalid("a secret name is 1–128 characters of [A-Za-z0-9_.-]", "name");
  }
}

/** The handlers over `store`. */
export function createVaultHandlers(store: VaultStore): ServiceImpl<typeof VaultService> {
  /** The vault, when the caller may see it (else `resource_not_found`). */
  async function visible(id: string, context: HandlerContext): Promise<VaultRecord> {
    const caller = callerOf(context);
    // Ids are unique per workspace: a caller bound to one finds only its own
    // (another workspace's vault of the same id is not there for it).
    let vault: VaultRecord | undefined;
    if (id === "") vault = undefined;
    else if (caller !== undefined && !isAdmin(caller))
      vault = await store.get(id, caller.workspaceId);
    else vault = await store.getAny(id, caller?.workspaceId);
    if (!vault) throw errors.notFound("vault", id);
    return vault;
  }

  function writable(vault: VaultRecord): void {
    if (!vault.capabilities.includes("write")) {
      throw new TrellisError({
        reason: "policy_violation",
        message: `vault ${vault.id} does not allow writing secrets (capabilities: ${vault.capabilities.join(", ") || "none"})`,
        domain: "adapters",
      });
    }
  }

  return {
    async createVault(request, context) {
      const caller = callerOf(context);
      let workspaceId: string | null;
      if (request.tenantGlobal) {
        if (!isAdmin(caller)) {
          throw new TrellisError({
            reason: "permission_denied",
            message: "tenant-global vaults need an admin credential",
            domain: "adapters",
          });
        }
        workspaceId = null;
      } else {
        workspaceId = request.workspaceId || caller?.workspaceId || "";
        if (!workspaceId) throw errors.invalid("workspace_id is required", "workspace_id");
        if (!isAdmin(caller) && workspaceId !== caller?.workspaceId) {
          throw errors.notFound("workspace", workspaceId);
        }
      }
      const provider = providerOf(request.provider);
      const capabilities =
        request.capabilities.length > 0
          ? capabilitiesOf(request.capabilities, provider)
          : [...(VAULT_PROVIDERS[provider] ?? [])];
      const vault = await store.create({
        ...(request.vaultId ? { id: request.vaultId } : {}),
        workspaceId,
        provider,
        capabilities,
        allowedAgentIds: agentIdsOf(request.allowedAgentIds),
        metadata: request.metadata ?? {},
        createdBy: caller?.actorId ?? "system",
      });
      return { vault: vaultToProto(vault) };
    },

    async getVault(request, context) {
      return { vault: vaultToProto(await visible(request.vaultId, context)) };
    },

    async listVaults(request, context) {
      const caller = callerOf(context);
      let workspaceId: string | undefined;
      if (isAdmin(caller)) {
        workspaceId = request.workspaceId || undefined;
      } else {
        if (request.workspaceId && request.workspaceId !== caller?.workspaceId) {
          throw errors.notFound("workspace", request.workspaceId);
        }
        workspaceId = caller?.workspaceId;
      }
      const limit = Math.min(Math.max(request.pageSize || 50, 1), MAX_PAGE);
      const vaults = await store.list({ workspaceId, after: request.pageToken, limit: limit + 1 });
      const page = vaults.slice(0, limit);
      return {
        vaults: page.map(vaultToProto),
        nextPageToken: vaults.length > limit ? (page.at(-1)?.id ?? "") : "",
      };
    },

    async updateVault(request, context) {
      const paths = request.updateMask?.paths ?? [];
      if (paths.length === 0) {
        throw errors.invalid(
          `update_mask must name the fields to set (${UPDATABLE.join(", ")})`,
          "update_mask",
        );
      }
      const unknown = paths.find((path) => !(UPDATABLE as readonly string[]).includes(path));
      if (unknown !== undefined) {
        throw errors.invalid(
          `${JSON.stringify(unknown)} cannot be updated; fields: ${UPDATABLE.join(", ")}`,
          "update_mask",
        );
      }
      const vault = await visible(request.vaultId, context);
      const updated = await store.update(vault, {
        ...(paths.includes("capabilities")
          ? { capabilities: capabilitiesOf(request.capabilities, vault.provider) }
          : {}),
        ...(paths.includes("allowed_agent_ids")
          ? { allowedAgentIds: agentIdsOf(request.allowedAgentIds) }
          : {}),
        ...(paths.includes("metadata") ? { metadata: request.metadata ?? {} } : {}),
      });
      if (!updated) throw errors.notFound("vault", vault.id);
      return { vault: vaultToProto(updated) };
    },

    async deleteVault(request, context) {
      const vault = await visible(request.vaultId, context);
      if (!(await store.delete(vault))) throw errors.notFound("vault", vault.id);
      return {};
    },

    async putSecret(request, context) {
      const vault = await visible(request.vaultId, context);
      writable(vault);
      checkSecretName(request.name);
      checkOAuthSecret(vault, request.name, request.value);
      if (Buffer.byteLength(request.value, "utf8") > MAX_SECRET_BYTES) {
        throw new TrellisError({
          reason: "payload_too_large",
          message: `a secret value is at most ${MAX_SECRET_BYTES} bytes`,
          param: "value",
        });
      }
      const secret = await store.putSecret(vault, request.name, request.value);
      return { secret: secretToProto(secret) };
    },

    async deleteSecret(request, context) {
      const vault = await visible(request.vaultId, context);
      writable(vault);
      checkSecretName(request.name);
      if (!(await store.deleteSecret(vault, request.name))) {
        throw errors.notFound("secret", `${vault.id}/${request.name}`);
      }
      return {};
    },

    async listSecrets(request, context) {
      const vault = await visible(request.vaultId, context);
      return { secrets: (await store.listSecrets(vault)).map(secretToProto) };
    },
  };
}

/**
 * `trellis.adapters.v1.VaultAccessService`: the vaults a turn's agent may
 * name, with the allowed ones' secrets, for the routers of the mesh. Only
 * for internal calls: a call carrying a caller (a user's request handed on)
 * is refused.
 */
export function createVaultAccessHandlers(
  store: VaultStore,
): ServiceImpl<typeof VaultAccessService> {
  return {
    async getAgentVaults(request, context) {
      refuseUserCalls(context);
      if (!request.workspaceId) throw errors.invalid("workspace_id is required", "workspace_id");
      if (!request.agentId) throw errors.invalid("agent_id is required", "agent_id");
      const vaults = await store.accessFor(request.workspaceId, request.agentId);
      return { vaults: vaultGrantsToProto(vaults) };
    },

    async getAccessToken(request, context) {
      refuseUserCalls(context);
      if (!request.workspaceId) throw errors.invalid("workspace_id is required", "workspace_id");
      if (!request.vaultId) throw errors.invalid("vault_id is required", "vault_id");
      const token = await store.accessToken(request.workspaceId, request.vaultId);
      return { accessToken: token.accessToken, expiresAt: timestampFromDate(token.expiresAt) };
    },
  };
}

/** VaultAccessService answers the services of the mesh only: a call with a caller is refused. */
function refuseUserCalls(context: HandlerContext): void {
  if (callerOf(context) !== undefined) {
    throw new TrellisError({
      reason: "permission_denied",
      message: "VaultAccessService is for the services of the mesh only",
      domain: "adapters",
    });
  }
}
