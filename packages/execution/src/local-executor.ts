/**
 * An executor over in-process adapters only (embedded mode, tests): the
 * {@link Router} with no remote workers, so negotiation, policy and the
 * `routed` / `turn_finished` events are exactly those of the mesh.
 * Defaults to the backends that need nothing external: "scripted".
 *
 * Also which backends a service runs in its own process: embedded mode runs
 * the built-in ones (scripted and the harness) there, distributed mode only
 * the scripted one — the harness runs in adapter workers
 * (`trellis serve adapter-worker`).
 */

import type { AgentExecutor, ExecutionAdapter } from "@trellis/adapter-sdk";
import { outboundAddressRefusal } from "@trellis/platform";
import type { SecretFingerprints } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import { createA2aAdapter } from "./a2a/a2a-adapter.js";
import type { HarnessEnvironment } from "./harness/environment.js";
import { createHarnessAdapter } from "./harness/harness-adapter.js";
import { harnessMcpPolicyFromEnv } from "./harness/mcp/definition.js";
import { harnessProvidersFromEnv } from "./harness/providers-from-env.js";
import { PostgresToolRunLedger, type ToolRunLedger } from "./harness/tool-run-ledger.js";
import type { HarnessTool } from "./harness/tools.js";
import type { VaultAccessLoader } from "./routing/dispatcher-options.js";
import { BackendRegistry } from "./routing/registry.js";
import { Router } from "./routing/router.js";
import { createScriptedAdapter } from "./scripted/scripted-adapter.js";
import { VaultStore } from "./vaults/store.js";
import { vaultSecretLoader } from "./vaults/vault-environment.js";
import { loadVaultBox } from "./vaults/vault-key.js";
import { loadHarnessTools } from "./worker/harness-tools.js";

/** Create an executor that runs `adapters` in this process, through routing. */
export function createLocalExecutor(
  adapters: readonly ExecutionAdapter[] = [createScriptedAdapter()],
): AgentExecutor & Router {
  const registry = new BackendRegistry();
  for (const adapter of adapters) registry.addLocal(adapter);
  return new Router({ registry });
}

/** Options of {@link createBuiltinAdapters}. */
export interface BuiltinAdaptersOptions {
  /**
   * The deployment's environment: the harness's providers come from
   * `OPENAI_API_KEY` / `OPENAI_BASE_URL`, `ANTHROPIC_API_KEY` /
   * `ANTHROPIC_BASE_URL` (a provider without a key is still offered; its
   * turns fail with `provider_authentication`).
   */
  env: Readonly<Record<string, string | undefined>>;
  /** The harness's tools. */
  tools?: readonly HarnessTool[];
  /** The harness's tool-run ledger (default: in memory, exact within this process). */
  ledger?: ToolRunLedger;
  /** Where the harness's tools read the clock and secrets (default: wall clock, no secrets). */
  environment?: HarnessEnvironment;
}

/** The backends Trellis ships that need no program of the operator's: scripted and the harness. */
export function createBuiltinAdapters(options: BuiltinAdaptersOptions): ExecutionAdapter[] {
  return [
    createScriptedAdapter(),
    createHarnessAdapter({
      providers: harnessProvidersFromEnv({ ...options.env }),
      mcp: harnessMcpPolicyFromEnv({ ...options.env }),
      ...(options.tools ? { tools: options.tools } : {}),
      ...(options.ledger ? { ledger: options.ledger } : {}),
      ...(options.environment ? { environment: options.environment } : {}),
    }),
  ];
}

/** Options of {@link createInProcessBackends}. */
export interface InProcessBackendsOptions {
  mode: "embedded" | "distributed";
  /** The host's environment (providers, `TRELLIS_HARNESS_TOOLS`). */
  env: Readonly<Record<string, string | undefined>>;
  /**
   * Embedded mode: the database of the harness's tool-run ledger (schema
   * `harness`, migrated here), so an approved call runs once across restarts;
   * also where the harness's tools read vault secrets (the adapters service's
   * `adapters` schema, migrated by that service).
   */
  db?: Database<unknown>;
  /** Embedded mode's data directory (the generated vault key lives there). */
  dataDir?: string | undefined;
  /** The deployment's secret fingerprints (`ServiceContext.fingerprints`), for the harness's records of secret reads. */
  fingerprints?: SecretFingerprints;
  /**
   * The vaults an agent may read (the A2A backend's credentials); without it
   * A2A agents that name a credential fail with `secret_denied`.
   */
  vaultAccess?: VaultAccessLoader;
}

/** What a service runs in its own process. */
export interface InProcessBackends {
  adapters: ExecutionAdapter[];
  /** The harness tools the deployment supplies (`TRELLIS_HARNESS_TOOLS`), in any mode. */
  harnessTools: HarnessTool[];
}

/**
 * The in-process backends of a service's router: embedded, the built-in
 * ones (scripted, harness); distributed, scripted only (the harness runs in
 * adapter workers, next to the providers' keys).
 *
 * @throws TrellisError `config_invalid` when `TRELLIS_HARNESS_TOOLS` names a
 *   module that is not a list of tools.
 */
export async function createInProcessBackends(
  options: InProcessBackendsOptions,
): Promise<InProcessBackends> {
  const harnessTools = await loadHarnessTools(options.env.TRELLIS_HARNESS_TOOLS);
  // The A2A backend calls remote agents over HTTP: in process in both modes.
  const a2a = createA2aAdapter({
    allowPrivate: options.env.TRELLIS_A2A_ALLOW_PRIVATE === "1",
    // The platform's one outbound address policy, checked at connect.
    addressRefusal: outboundAddressRefusal,
    ...(options.vaultAccess ? { vaults: options.vaultAccess } : {}),
  });
  if (options.mode === "distributed") {
    return { adapters: [createScriptedAdapter(), a2a], harnessTools };
  }
  const ledger = options.db ? await PostgresToolRunLedger.open(options.db) : undefined;
  // Tools read vault secrets (`<vault_id>/<name>`) under the vaults' access
  // policy; their reads are recorded with the deployment's fingerprints.
  const { fingerprints } = options;
  const environment: HarnessEnvironment | undefined =
    options.db || fingerprints
      ? {
          ...(fingerprints ? { fingerprint: (value: string) => fingerprints.of(value) } : {}),
          ...(options.db
            ? {
                vaultSecrets: vaultSecretLoader(
                  new VaultStore(
                    options.db,
                    "adapters",
                    await loadVaultBox({
                      mode: options.mode,
                      env: options.env,
                      dataDir: options.dataDir,
                      db: options.db,
                    }),
                  ),
                ),
              }
            : {}),
        }
      : undefined;
  return {
    adapters: [
      ...createBuiltinAdapters({
        env: options.env,
        tools: harnessTools,
        ...(ledger ? { ledger } : {}),
        ...(environment ? { environment } : {}),
      }),
      a2a,
    ],
    harnessTools,
  };
}
