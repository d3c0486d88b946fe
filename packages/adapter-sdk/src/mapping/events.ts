/**
 * Mapping of execution events (the kind oneof) and vault grants.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  ExecutionEventSchema,
  type ExecutionEvent as PbEvent,
  type VaultGrant as PbVaultGrant,
  type VaultGrantSchema,
} from "@trellis/contracts/adapters";
import { isSecretFingerprint, type SecretFingerprint } from "@trellis/runtime";
import type { ExecutionEvent, VaultGrant } from "../types.js";
import { reasonFromProto, reasonToProto } from "./negotiation.js";
import { resultFromProto, resultToProto, usageFromProto, usageToProto } from "./result.js";
import { contractInvalid, defined, toolOutcome, valueFromPb, valueToPb } from "./tables.js";

// ----------------------------------------------------------------- events

type EventInit = MessageInitShape<typeof ExecutionEventSchema>["kind"];

function eventKindToProto(value: ExecutionEvent): EventInit {
  switch (value.kind) {
    case "text_delta":
      return { case: "textDelta", value: { text: value.text, index: value.index ?? 0 } };
    case "thinking_delta":
      return { case: "thinkingDelta", value: { text: value.text } };
    case "message":
      return { case: "message", value: value.message };
    case "tool_call_delta":
      return {
        case: "toolCallDelta",
        value: { toolCallId: value.toolCallId, name: value.name ?? "", argsDelta: value.argsDelta },
      };
    case "tool_started":
      return {
        case: "toolStarted",
        value: {
          toolCallId: value.toolCallId,
          name: value.name,
          ...(value.input !== undefined ? { input: valueToPb(value.input) } : {}),
          ...(value.mcpServer ? { mcpServer: value.mcpServer } : {}),
        },
      };
    case "tool_finished":
      return {
        case: "toolFinished",
        value: {
          toolCallId: value.toolCallId,
          name: value.name,
          outcome: toolOutcome.to(value.status),
        },
      };
    case "step_finished":
      return {
        case: "stepFinished",
        value: {
          iteration: value.iteration,
          ...(value.usage ? { usage: usageToProto(value.usage) } : {}),
        },
      };
    case "routed":
      return {
        case: "routed",
        value: {
          backendId: value.backendId,
          workerId: value.workerId,
          attempt: value.attempt,
          degraded: value.degraded,
          reasons: value.reasons.map(reasonToProto),
        },
      };
    case "turn_finished":
      return { case: "turnFinished", value: { result: resultToProto(value.result) } };
  }
}

export function eventToProto(value: ExecutionEvent): PbEvent {
  return create(ExecutionEventSchema, { kind: eventKindToProto(value) });
}

export function eventFromProto(value: PbEvent, field = "event"): ExecutionEvent {
  const kind = value.kind;
  switch (kind.case) {
    case "textDelta":
      return defined({
        kind: "text_delta",
        text: kind.value.text,
        index: kind.value.index || undefined,
      });
    case "thinkingDelta":
      return { kind: "thinking_delta", text: kind.value.text };
    case "message":
      return { kind: "message", message: kind.value };
    case "toolCallDelta":
      return defined({
        kind: "tool_call_delta",
        toolCallId: kind.value.toolCallId,
        name: kind.value.name || undefined,
        argsDelta: kind.value.argsDelta,
      });
    case "toolStarted":
      return {
        kind: "tool_started",
        toolCallId: kind.value.toolCallId,
        name: kind.value.name,
        ...(kind.value.input ? { input: valueFromPb(kind.value.input) } : {}),
        ...(kind.value.mcpServer ? { mcpServer: kind.value.mcpServer } : {}),
      };
    case "toolFinished":
      return {
        kind: "tool_finished",
        toolCallId: kind.value.toolCallId,
        name: kind.value.name,
        status: toolOutcome.from(kind.value.outcome, `${field}.tool_finished.outcome`),
      };
    case "stepFinished":
      return {
        kind: "step_finished",
        iteration: kind.value.iteration,
        ...(kind.value.usage ? { usage: usageFromProto(kind.value.usage) } : {}),
      };
    case "routed":
      return {
        kind: "routed",
        backendId: kind.value.backendId,
        workerId: kind.value.workerId,
        attempt: kind.value.attempt,
        degraded: kind.value.degraded,
        reasons: kind.value.reasons.map((r, i) =>
          reasonFromProto(r, `${field}.routed.reasons[${i}]`),
        ),
      };
    case "turnFinished":
      return {
        kind: "turn_finished",
        result: resultFromProto(kind.value.result, `${field}.turn_finished.result`),
      };
    default:
      throw contractInvalid(`${field}.kind`, "is required");
  }
}

/** Vault grants → proto (`VaultGrant`, of SecretsResponse and GetAgentVaultsResponse). */
export function vaultGrantsToProto(
  vaults: ReadonlyMap<string, VaultGrant>,
): MessageInitShape<typeof VaultGrantSchema>[] {
  return [...vaults].map(([vaultId, grant]) =>
    grant.allowed
      ? {
          vaultId,
          allowed: true,
          secrets: Object.fromEntries(grant.secrets),
          ...(grant.fingerprints ? { fingerprints: Object.fromEntries(grant.fingerprints) } : {}),
        }
      : { vaultId, allowed: false, reason: grant.reason },
  );
}

/**
 * Proto `VaultGrant`s → vault grants, by vault id.
 *
 * @throws TrellisError `execution_contract_invalid` when a fingerprint is not
 *   `hmac-sha256:<64 lowercase hex>` or names a secret the vault does not
 *   grant (the sender is broken: no record may carry it).
 */
export function vaultGrantsFromProto(
  vaults: readonly PbVaultGrant[],
): ReadonlyMap<string, VaultGrant> {
  return new Map(
    vaults.map((vault, i): [string, VaultGrant] => {
      if (!vault.allowed) return [vault.vaultId, { allowed: false, reason: vault.reason }];
      const fingerprints = new Map<string, SecretFingerprint>();
      for (const [name, fingerprint] of Object.entries(vault.fingerprints)) {
        const field = `vaults[${i}].fingerprints[${JSON.stringify(name)}]`;
        if (!isSecretFingerprint(fingerprint)) {
          throw contractInvalid(field, "must be hmac-sha256:<64 lowercase hex>");
        }
        if (!Object.hasOwn(vault.secrets, name)) {
          throw contractInvalid(field, `names no secret of vault ${vault.vaultId}`);
        }
        fingerprints.set(name, fingerprint);
      }
      const secrets = new Map(Object.entries(vault.secrets));
      return [
        vault.vaultId,
        fingerprints.size > 0
          ? { allowed: true, secrets, fingerprints }
          : { allowed: true, secrets },
      ];
    }),
  );
}
