/** AgentService: agents (Harn personas), validated by the backend that runs them. */
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { AgentSchema, type AgentService, CreateAgentRequestSchema } from "@trellis/contracts/tasks";
import { isTrellisError } from "@trellis/runtime";
import { agentDefinitionInvalid, invalidRequest } from "../domain/errors.js";
import {
  type HandlerDeps,
  idempotencyOf,
  pageOf,
  scopeOf,
  workspaceOfRequest,
  writeContext,
} from "./common.js";

/** Backend of agents that name none. */
const DEFAULT_BACKEND = "scripted";

export function createAgentHandlers({
  store,
  executor,
}: HandlerDeps): ServiceImpl<typeof AgentService> {
  return {
    async createAgent(request, context) {
      if (!request.agent) throw invalidRequest("agent is required", "agent");
      const agent = create(AgentSchema, request.agent);
      agent.backend ||= DEFAULT_BACKEND;
      agent.workspaceId = workspaceOfRequest(context, agent.workspaceId);
      if (!executor.backends().includes(agent.backend)) {
        throw agentDefinitionInvalid(
          `no execution backend ${JSON.stringify(agent.backend)} (available: ${executor.backends().join(", ")})`,
          "agent.backend",
        );
      }
      try {
        executor.validateDefinition(agent.backend, agent.definition ?? {});
      } catch (error) {
        if (isTrellisError(error) && error.reason === "agent_definition_invalid") throw error;
        throw agentDefinitionInvalid(
          error instanceof Error ? error.message : String(error),
          "agent.definition",
        );
      }
      const created = await store.createAgent(
        agent,
        idempotencyOf(CreateAgentRequestSchema, request, request.idempotencyKey),
        writeContext(context),
      );
      return { agent: created };
    },
    async getAgent(request, context) {
      return { agent: await store.getAgent(request.agentId, scopeOf(context)) };
    },
    async listAgents(request, context) {
      const page = await store.listAgents(
        workspaceOfRequest(context, request.workspaceId),
        pageOf(request),
        scopeOf(context),
      );
      return { agents: page.items, nextPageToken: page.nextPageToken };
    },
  };
}
