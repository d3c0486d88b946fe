/**
 * Options of the {@link JetStreamDispatcher} (`./jetstream-dispatcher.ts`)
 * and their defaults, and the vault grants it hands to workers.
 */
import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { NatsConnection } from "@nats-io/transport-node";
import { toToken, type VaultGrant } from "@trellis/adapter-sdk";
import type { Logger, SecretFingerprints } from "@trellis/runtime";
import type { BackendRegistry } from "./registry.js";

/** Options of {@link JetStreamDispatcher.open}. */
export interface JetStreamDispatcherOptions {
  connection: NatsConnection;
  registry: BackendRegistry;
  /** Subject prefix (TRELLIS_NATS_PREFIX, default "trellis"). */
  prefix?: string;
  /** This router's id (default: host, pid, random). */
  routerId?: string;
  /** Storage of the work-queue stream if this router creates it (default file). */
  storage?: "file" | "memory";
  /** How long a canceled or timed-out worker may take to report (default 2000 ms). */
  graceMs?: number;
  /** Placements of one execution at most, counting retries after lost workers (default 3). */
  maxAttempts?: number;
  /**
   * How often dead workers and stuck queues are checked while executions are
   * waiting or running (default 200 ms); with none, the interval doubles per
   * check up to 8 × that, and the next dispatch brings it back at once.
   */
  sweepMs?: number;
  /** A queued execution whose backend has no live worker this long fails (default 5000 ms). */
  unavailableAfterMs?: number;
  /** A direct offer not claimed this long is placed again (default 10000 ms). */
  claimTimeoutMs?: number;
  /**
   * The vaults an agent's tools in a workspace may name (the vault access
   * policy), for the workers running its executions; absent: none.
   */
  vaultAccess?: VaultAccessLoader;
  /**
   * The deployment's secret fingerprints: each secret granted to a worker
   * goes with its fingerprint (`VaultGrant.fingerprints`), which the worker's
   * harness records, since it holds no key. Absent: none sent (the worker
   * records such reads with a null fingerprint).
   */
  fingerprints?: SecretFingerprints;
  logger?: Logger;
}

/** The vaults of a workspace as the tools of one agent see them. */
export type VaultAccessLoader = (
  workspaceId: string,
  agentId: string,
) => Promise<ReadonlyMap<string, VaultGrant>>;

/** The timing and retry settings of a dispatcher, its options' defaults filled in. */
export interface DispatcherSettings {
  routerId: string;
  graceMs: number;
  maxAttempts: number;
  sweepMs: number;
  unavailableAfterMs: number;
  claimTimeoutMs: number;
}

/** {@link DispatcherSettings} of `options` (see {@link JetStreamDispatcherOptions} for the defaults). */
export function dispatcherSettings(options: JetStreamDispatcherOptions): DispatcherSettings {
  return {
    routerId:
      options.routerId ??
      toToken(`router-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`),
    graceMs: options.graceMs ?? 2000,
    maxAttempts: options.maxAttempts ?? 3,
    sweepMs: options.sweepMs ?? 200,
    unavailableAfterMs: options.unavailableAfterMs ?? 5000,
    claimTimeoutMs: options.claimTimeoutMs ?? 10_000,
  };
}

/** The grants with each allowed secret's fingerprint (as given without fingerprints). */
export function withFingerprints(
  vaults: ReadonlyMap<string, VaultGrant>,
  fingerprints: SecretFingerprints | undefined,
): ReadonlyMap<string, VaultGrant> {
  if (!fingerprints) return vaults;
  return new Map(
    [...vaults].map(([vaultId, grant]): [string, VaultGrant] => [
      vaultId,
      grant.allowed
        ? {
            ...grant,
            fingerprints: new Map(
              [...grant.secrets].map(([name, value]) => [name, fingerprints.of(value)]),
            ),
          }
        : grant,
    ]),
  );
}
