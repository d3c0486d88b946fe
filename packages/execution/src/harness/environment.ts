/**
 * The clock and secrets a harness tool reads through its context
 * (`ToolContext.now` / `ToolContext.secret`), and their records for replay.
 *
 * Each read is recorded on the call's tool message: a time reading as
 * `time:<label>` → `{kind: "time", label, value, tool_call_id}`, a secret as
 * `secret:<name>` → `{kind: "secret_value", name, set, fingerprint,
 * tool_call_id}` — never its value, and never a plain hash of it (a
 * low-entropy secret would be brute-forced from one): `fingerprint` is the
 * deployment's keyed `hmac-sha256:<hex>` of the value, from the environment
 * ({@link HarnessEnvironment.fingerprint}, in-process) or from whoever granted
 * the vault secret (a remote worker holds no key: its router sends each
 * granted secret's fingerprint), else null. Records written before
 * fingerprints carry `sha256` instead; readers accept both. A replay gives the
 * same readings again, or its `time:` / `secret:` overrides (the tasks
 * service's replay executor supplies its own {@link HarnessEnvironment}).
 *
 * Vault secrets: a name `<vault_id>/<secret name>` is read from the vaults
 * of the task's workspace (and tenant-global ones) whose access policy lists
 * the task's agent — {@link HarnessEnvironment.vaultSecrets}, loaded before
 * the turn's first tool call runs and kept for the turn. A missing or denied one is a {@link SecretAccessError}
 * (the tool call fails with a message naming the secret, never a value).
 * In-process the vaults come from the vault store; in a remote adapter
 * worker from the router that granted the turn (`request.vaultSecrets`).
 * Without either (replays) such a name reads as unset, like any other
 * secret the environment does not have.
 */
import { createHash } from "node:crypto";
import type { JsonObject } from "@bufbuild/protobuf";
import type { ExecutionRequest, VaultGrant } from "@trellis/adapter-sdk";
import type { SecretFingerprint } from "@trellis/runtime";

/** Which tool call a clock or secret read belongs to. */
export interface EnvironmentCall {
  taskId: string;
  toolCallId: string;
}

/** Whose tool call reads vault secrets (the vault access policy's subject). */
export interface SecretScope extends EnvironmentCall {
  workspaceId: string;
  agentId: string;
}

/** Vault secrets one tool call may read, loaded before it runs. */
export interface SecretSource {
  /**
   * The value of `<vault_id>/<name>`.
   *
   * @throws SecretAccessError when there is no such secret or the vault's
   *   policy does not allow the agent.
   */
  read(name: string): string;
  /**
   * The fingerprint the grantor vouched for with `<vault_id>/<name>`'s value
   * (a remote worker's router), undefined when it sent none.
   */
  fingerprint?(name: string): SecretFingerprint | undefined;
}

/** Why a tool could not read a vault secret; names the secret, never a value. */
export class SecretAccessError extends Error {
  constructor(
    readonly code: "secret_not_found" | "secret_denied",
    readonly secretName: string,
    detail: string,
  ) {
    super(`secret ${JSON.stringify(secretName)} is not available (${code}): ${detail}`);
    this.name = "SecretAccessError";
  }
}

/** Where tools read the time and secrets (see the module comment). */
export interface HarnessEnvironment {
  /** The time of a labelled reading (default: the wall clock). */
  now?(label: string, call: EnvironmentCall): Date;
  /** A secret's value, undefined when there is none (default: no secrets). */
  secret?(name: string, call: EnvironmentCall): string | undefined;
  /**
   * The vault secrets (`<vault_id>/<name>`) the call may read under the vault
   * access policy (default: none; such names then go to {@link secret}).
   */
  vaultSecrets?(scope: SecretScope): Promise<SecretSource>;
  /**
   * The deployment's keyed fingerprint of a secret value (default: none; a
   * secret read is then recorded with a null fingerprint unless its vault
   * grant carried one).
   */
  fingerprint?(value: string): SecretFingerprint;
}

/** Why the vault secrets of a tool call could not be loaded (the turn fails, retryably). */
export class VaultUnavailableError extends Error {
  constructor(cause: unknown) {
    super(
      `the vault secrets of a tool call cannot be loaded: ${cause instanceof Error ? cause.message : String(cause)}`,
      { cause },
    );
    this.name = "VaultUnavailableError";
  }
}

/**
 * The vault secrets a tool call of `agentId` in `workspaceId` may read: from
 * the environment's vault source (in-process: the vault store), else from the
 * request's host (a remote worker asks its router), else none.
 *
 * @throws VaultUnavailableError when they cannot be loaded.
 */
export async function loadVaultSecrets(
  environment: HarnessEnvironment,
  scope: SecretScope,
  request?: Pick<ExecutionRequest, "vaultSecrets">,
): Promise<SecretSource | undefined> {
  const fromHost = request?.vaultSecrets;
  const load =
    environment.vaultSecrets?.bind(environment) ??
    (fromHost ? async () => vaultSource(await fromHost(), scope.workspaceId) : undefined);
  if (!load) return undefined;
  try {
    return await load(scope);
  } catch (error) {
    throw new VaultUnavailableError(error);
  }
}

/** Reads `<vault_id>/<name>` from the vaults a call may name, under their access policy. */
export function vaultSource(
  vaults: ReadonlyMap<string, VaultGrant>,
  workspaceId: string,
): SecretSource {
  return {
    read(name) {
      const slash = name.indexOf("/");
      const vaultId = name.slice(0, slash);
      const secretName = name.slice(slash + 1);
      const vault = vaults.get(vaultId);
      if (!vault) {
        throw new SecretAccessError(
          "secret_not_found",
          name,
          `no vault ${vaultId} in workspace ${workspaceId}`,
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
    fingerprint(name) {
      const slash = name.indexOf("/");
      const vault = vaults.get(name.slice(0, slash));
      return vault?.allowed ? vault.fingerprints?.get(name.slice(slash + 1)) : undefined;
    },
  };
}

/** Labels of clock readings and names of secrets (`<vault_id>/<name>` for a vault's). */
const READ_NAME = /^[A-Za-z0-9_.:-]{1,128}(\/[A-Za-z0-9_.-]{1,128})?$/;

/** Whether a secret name is a vault's (`<vault_id>/<name>`). */
export function isVaultSecretName(name: string): boolean {
  return name.includes("/");
}

/**
 * `sha256:<hex>` of a text's RFC 8785 form (for a string that is its JSON
 * string literal, which `JSON.stringify` writes), as every Trellis hash of
 * recorded material is made.
 */
export function textSha256(text: string): string {
  return `sha256:${createHash("sha256").update(JSON.stringify(text), "utf8").digest("hex")}`;
}

/** The reads of one tool call, recorded as they happen. */
export class CallReads {
  /** `time:<label>` / `secret:<name>` records, for the call's tool message metadata. */
  readonly records: JsonObject = {};

  constructor(
    private readonly environment: HarnessEnvironment,
    private readonly call: EnvironmentCall,
    /** The call's vault secrets, when the environment has a vault source. */
    private readonly vault?: SecretSource,
  ) {}

  /** `ToolContext.now`: one reading per label and call. */
  now(label: string): string {
    if (!READ_NAME.test(label)) {
      throw new Error(`clock reading label ${JSON.stringify(label)} must match ${READ_NAME}`);
    }
    const key = `time:${label}`;
    const known = this.records[key];
    if (typeof known === "object" && known !== null && !Array.isArray(known)) {
      if (typeof known.value === "string") return known.value;
    }
    const value = (this.environment.now?.(label, this.call) ?? new Date()).toISOString();
    this.records[key] = { kind: "time", label, value, tool_call_id: this.call.toolCallId };
    return value;
  }

  /** `ToolContext.secret`: the value for the tool, only its keyed fingerprint in the record. */
  secret(name: string): string | undefined {
    if (!READ_NAME.test(name)) {
      throw new Error(`secret name ${JSON.stringify(name)} must match ${READ_NAME}`);
    }
    let value: string | undefined;
    let vouched: SecretFingerprint | undefined;
    if (this.vault && isVaultSecretName(name)) {
      try {
        value = this.vault.read(name);
        vouched = this.vault.fingerprint?.(name);
      } catch (error) {
        if (error instanceof SecretAccessError) {
          this.records[`secret:${name}`] = {
            kind: "secret_value",
            name,
            set: false,
            fingerprint: null,
            denied: error.code,
            tool_call_id: this.call.toolCallId,
          };
        }
        throw error;
      }
    } else {
      value = this.environment.secret?.(name, this.call);
    }
    this.records[`secret:${name}`] = {
      kind: "secret_value",
      name,
      set: value !== undefined,
      fingerprint:
        value === undefined ? null : (vouched ?? this.environment.fingerprint?.(value) ?? null),
      tool_call_id: this.call.toolCallId,
    };
    return value;
  }
}
