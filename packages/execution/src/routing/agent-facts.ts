/**
 * Filling in what the caller of an executor knows about an agent but did not
 * put in the request (today: whether a turn is safe to run again after a
 * lost worker). Agents are immutable, so one lookup per agent id is enough.
 */
import type { AgentExecutor, ExecutionRequest } from "@trellis/adapter-sdk";

/** What {@link withAgentFacts} reads about an agent. */
export interface AgentFacts {
  safeToRetry: boolean;
}

/** Options of {@link withAgentFacts}. */
export interface AgentFactsOptions {
  /** Agents remembered at most (default 1000; the oldest is forgotten first). */
  maxAgents?: number;
}

/**
 * Wrap `executor` so requests that do not say whether the agent is safe to
 * retry get it from `lookup` (cached per workspace and agent id). A failing lookup leaves
 * the request as it is (not safe to retry: the cautious default).
 */
export function withAgentFacts<E extends AgentExecutor>(
  executor: E,
  lookup: (agentId: string, workspaceId: string) => Promise<AgentFacts>,
  options: AgentFactsOptions = {},
): AgentExecutor {
  const max = options.maxAgents ?? 1000;
  const cache = new Map<string, AgentFacts>();
  // Agent ids are unique per workspace: the cache is keyed by both.
  const factsOf = async (agentId: string, workspaceId: string): Promise<AgentFacts | undefined> => {
    const key = JSON.stringify([workspaceId, agentId]);
    const known = cache.get(key);
    if (known) return known;
    try {
      const facts = await lookup(agentId, workspaceId);
      if (cache.size >= max) cache.delete(cache.keys().next().value as string);
      cache.set(key, facts);
      return facts;
    } catch {
      return undefined;
    }
  };
  return {
    backends: () => executor.backends(),
    validateDefinition: (backend, definition) => executor.validateDefinition(backend, definition),
    ...(executor.preflight
      ? { preflight: (request: ExecutionRequest) => executor.preflight?.(request) }
      : {}),
    async execute(request: ExecutionRequest) {
      if (request.agent.safeToRetry !== undefined) return executor.execute(request);
      const facts = await factsOf(request.agent.id, request.workspaceId);
      return executor.execute(
        facts
          ? { ...request, agent: { ...request.agent, safeToRetry: facts.safeToRetry } }
          : request,
      );
    },
  };
}
