/**
 * Agent (persona) policy of a credential (Harn v1 "Authorization rules":
 * Persona policy). An API key or OAuth client may be restricted to a list of
 * agent ids; a request through it that names, or would run, any other agent
 * is `403 permission_denied` — decided before anything is looked up, so the
 * answer says nothing about whether the agent exists. Credentials without a
 * policy may use every agent of their workspace (the default).
 *
 * The policy is persisted with the credential (`store.ts`), found at
 * authentication (`authenticate.ts`) and attached to the {@link Caller}, so
 * REST, WebSocket command frames (which run the REST routes) and gRPC
 * (`grpc.ts`) all check the same thing here.
 */
import type { Caller } from "@trellis/platform";
import { errors, TrellisError } from "@trellis/runtime";

/** The agents a credential may use. */
export interface AgentPolicy {
  readonly agentIds: readonly string[];
}

/** Most agent ids one credential may list. */
export const maxPolicyAgents = 100;
const agentIdPattern = /^[A-Za-z0-9_.:-]{1,200}$/;

const attached = new WeakMap<Caller, AgentPolicy>();

/** Attach the policy of the credential `caller` authenticated with. */
export function attachAgentPolicy(caller: Caller, policy: AgentPolicy): void {
  attached.set(caller, policy);
}

/** The agent policy of a caller; undefined: unrestricted. */
export function agentPolicyOf(caller: Caller | undefined): AgentPolicy | undefined {
  return caller === undefined ? undefined : attached.get(caller);
}

/**
 * `agent_ids` of a credential being created: absent → undefined
 * (unrestricted); otherwise 1…{@link maxPolicyAgents} agent ids.
 */
export function parseAgentIds(value: readonly string[] | undefined): string[] | undefined {
  if (value === undefined) return undefined;
  if (value.length === 0 || value.length > maxPolicyAgents) {
    throw errors.invalid(
      `agent_ids must list 1–${maxPolicyAgents} agent ids (omit it for every agent)`,
      "agent_ids",
    );
  }
  const bad = value.find((id) => !agentIdPattern.test(id));
  if (bad !== undefined) {
    throw errors.invalid(`${JSON.stringify(bad.slice(0, 64))} is not an agent id`, "agent_ids");
  }
  return [...new Set(value)];
}

/**
 * The policy a credential created by `creator` may be given: a restricted
 * creator cannot make an unrestricted credential, nor widen its own list.
 */
export function grantableAgentPolicy(
  creator: Caller,
  wanted: readonly string[] | undefined,
): readonly string[] | undefined {
  const own = agentPolicyOf(creator);
  if (own === undefined) return wanted;
  if (wanted === undefined) return own.agentIds;
  const outside = wanted.find((id) => !own.agentIds.includes(id));
  if (outside !== undefined) {
    throw new TrellisError({
      reason: "permission_denied",
      message: "a credential cannot be given agents its creator may not use",
      param: "agent_ids",
    });
  }
  return wanted;
}

function denied(message: string, param?: string): TrellisError {
  return new TrellisError({
    reason: "permission_denied",
    message,
    domain: "gateway",
    ...(param ? { param } : {}),
  });
}

/** The agents of `agents` the caller may use (all of them for an unrestricted caller). */
export function usableAgents<T extends { id: string }>(
  caller: Caller | undefined,
  agents: readonly T[],
): T[] {
  const policy = agentPolicyOf(caller);
  return policy ? agents.filter((agent) => policy.agentIds.includes(agent.id)) : [...agents];
}

/** Throws `permission_denied` unless the caller may use the agent `agentId`. */
export function ensureAgentAllowed(caller: Caller | undefined, agentId: string, param?: string) {
  const policy = agentPolicyOf(caller);
  if (policy === undefined || policy.agentIds.includes(agentId)) return;
  throw denied("this credential is not allowed to use that agent", param);
}

/**
 * Throws `permission_denied` unless the caller may run the agent a turn would
 * run: `named` (the request's agent id), else `bound()` (the session's
 * agent; "" when it has none or does not exist yet). A restricted credential
 * must end up with an agent it may use — the workspace default, which may
 * change under it, is not one.
 */
export async function ensureRunAllowed(
  caller: Caller | undefined,
  named: string,
  bound: () => Promise<string>,
  param: string,
): Promise<void> {
  const policy = agentPolicyOf(caller);
  if (policy === undefined) return;
  const agentId = named !== "" ? named : await bound();
  if (agentId === "") {
    throw denied(`this credential may only use named agents: set ${param}`, param);
  }
  ensureAgentAllowed(caller, agentId, param);
}
