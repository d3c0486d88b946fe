/**
 * The in-process harness's vault source: before a turn's first tool call,
 * the vaults of the task's workspace (and the tenant-global ones) are looked
 * up with their access policy for the task's agent, and only allowed vaults'
 * secrets are opened; the tool then reads `<vault_id>/<name>` through
 * `context.secret` (see `vaultSource`).
 */
import { vaultGrantsFromProto } from "@trellis/adapter-sdk";
import { VaultAccessService } from "@trellis/contracts/adapters";
import type { ServiceClients } from "@trellis/platform";
import { type SecretScope, type SecretSource, vaultSource } from "../harness/environment.js";
import type { VaultAccessLoader } from "../routing/dispatcher-options.js";
import type { VaultStore } from "./store.js";

/** A `vaultSecrets` loader (see `HarnessEnvironment`) over `store`. */
export function vaultSecretLoader(
  store: VaultStore,
): (scope: SecretScope) => Promise<SecretSource> {
  return async (scope) =>
    vaultSource(await store.accessFor(scope.workspaceId, scope.agentId), scope.workspaceId);
}

/**
 * A router's vault access (see `JetStreamDispatcherOptions.vaultAccess`) in
 * a service that does not keep the vaults: asked of the adapters service's
 * internal `VaultAccessService`.
 */
export function vaultAccessThrough(clients: ServiceClients): VaultAccessLoader {
  return async (workspaceId, agentId) =>
    vaultGrantsFromProto(
      (await clients.get(VaultAccessService).getAgentVaults({ workspaceId, agentId })).vaults,
    );
}
