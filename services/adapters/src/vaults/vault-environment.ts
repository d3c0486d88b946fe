/**
 * The harness's vault source: before a tool call runs, the vaults of the
 * task's workspace (and the tenant-global ones) are looked up with their
 * access policy for the task's agent, and only allowed vaults' secrets are
 * opened; the tool then reads `<vault_id>/<name>` through `context.secret`.
 */
import { SecretAccessError, type SecretScope, type SecretSource } from "../harness/environment.js";
import type { VaultStore } from "./store.js";

/** A `vaultSecrets` loader (see `HarnessEnvironment`) over `store`. */
export function vaultSecretLoader(
  store: VaultStore,
): (scope: SecretScope) => Promise<SecretSource> {
  return async (scope) => {
    const access = await store.accessFor(scope.workspaceId, scope.agentId);
    return {
      read(name) {
        const slash = name.indexOf("/");
        const vaultId = name.slice(0, slash);
        const secretName = name.slice(slash + 1);
        const vault = access.get(vaultId);
        if (!vault) {
          throw new SecretAccessError(
            "secret_not_found",
            name,
            `no vault ${vaultId} in workspace ${scope.workspaceId}`,
          );
        }
        if (!vault.allowed) throw new SecretAccessError("secret_denied", name, vault.reason);
        const value = vault.secrets.get(secretName);
        if (value === undefined) {
          throw new SecretAccessError(
            "secret_not_found",
            name,
            `vault ${vaultId} has no secret ${secretName}`,
          );
        }
        return value;
      },
    };
  };
}
