/**
 * Building receipts in unit tests without storage: events → facts → summary
 * → sealed receipt, as the processor does.
 */
import { generateKeyPairSync } from "node:crypto";
import type { Event } from "@trellis/contracts/core";
import type { AgentDirectory } from "../agents.js";
import {
  type AgentProfile,
  buildTaskReceipt,
  type SealedReceipt,
  sealReceipt,
} from "../domain/build.js";
import { eventHash, merkleRoot } from "../domain/canonical.js";
import { extractFacts, foldTaskFacts, streamIsComplete, taskIdOf } from "../domain/facts.js";
import type { Sha256 } from "../domain/receipt.js";
import { type SigningKey, signingKeyFromPem } from "../domain/signing.js";
import type { KeyRing } from "../keys.js";

/** A fresh Ed25519 signing key. */
export function newKey(keyId?: string): SigningKey {
  const { privateKey } = generateKeyPairSync("ed25519");
  return signingKeyFromPem(privateKey.export({ type: "pkcs8", format: "pem" }).toString(), keyId);
}

/** A key ring of `key` alone, with no keys table behind it. */
export function keyRingOf(key: SigningKey): KeyRing {
  return {
    current: key,
    publicKey: (id) => (id === key.keyId ? key.publicKey : undefined),
    ensure: async () => {},
    list: () => [],
  };
}

/**
 * A directory that knows every agent, at `act_with_approval` (`agent_echo`
 * when no event named the task's agent), on `backend` when given.
 */
export function everyAgentKnown(backend?: string): AgentDirectory {
  return {
    agentOfTask: async (_taskId, agentId) => ({
      known: true,
      profile: {
        agentId: agentId ?? "agent_echo",
        tier: "act_with_approval",
        ...(backend ? { backend } : {}),
      },
    }),
    workspace: async () => ({}),
  };
}

export const issuer = {
  id: "trellis-test",
  name: "Trellis",
  version: "agents-protocol-2026-04-25",
};

/** Seal the receipt of a task's events (sequenced), linked to `previousHash`. */
export function receiptOf(
  events: readonly Event[],
  key: SigningKey,
  previousHash: Sha256 | null = null,
  agent: AgentProfile = {
    agentId: "agent_echo",
    tier: "act_with_approval",
    backend: "scripted",
    deterministic: true,
  },
): SealedReceipt {
  const taskId = taskIdOf(events[0] as Event) as string;
  const records = events.map((event) => ({
    eventId: event.id,
    eventHash: eventHash(event),
    facts: extractFacts(event, taskId),
  }));
  const summary = foldTaskFacts(taskId, records);
  const complete = streamIsComplete(summary);
  const root = complete ? merkleRoot(summary.streamHashes) : undefined;
  const last = events.at(-1) as Event;
  const unsigned = buildTaskReceipt({
    receiptId: `rcpt_${taskId}`,
    issuedAt: new Date("2026-11-22T11:00:00Z"),
    issuer,
    keyId: key.keyId,
    workspaceId: last.workspaceId,
    sessionId: last.sessionId,
    summary,
    agent,
    policy: "required",
    streamComplete: complete,
    ...(root ? { merkleRoot: root } : {}),
  });
  return sealReceipt(unsigned, {
    previousHash,
    ...(root ? { merkleRoot: root } : {}),
    key,
    signedAt: new Date("2026-11-22T11:00:00Z"),
  });
}
