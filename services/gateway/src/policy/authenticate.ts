/**
 * Authentication that also finds the agent policy of the credential and
 * attaches it to the caller (see `agent-policy.ts`): one wrapper, used by
 * REST, WebSocket and gRPC alike.
 */
import type { Authenticator } from "../auth/authenticator.js";
import { attachAgentPolicy } from "./agent-policy.js";
import { type AgentPolicyStore, policyKeyOf } from "./store.js";

export function withAgentPolicies(inner: Authenticator, store: AgentPolicyStore): Authenticator {
  return {
    async authenticate(authorization, source) {
      const result = await inner.authenticate(authorization, source);
      if (!result.ok) return result;
      const key = policyKeyOf(result.credential);
      const policy = key === undefined ? undefined : await store.get(key);
      if (policy !== undefined) attachAgentPolicy(result.caller, policy);
      return result;
    },
  };
}
