/**
 * `trellis.tasks.v1.SkillService`: the skills of the caller's workspace
 * (its agents) and of the deployment (its tools), see `skills.ts`. A page
 * token is an offset into that list, agents first.
 */
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { type Skill, SkillSchema, type SkillService } from "@trellis/contracts/tasks";
import type { HarnessTool } from "@trellis/execution";
import { callerOf } from "@trellis/platform";
import { errors } from "@trellis/runtime";
import type { TaskStore } from "../store/task-store.js";
import { agentSkill, type SkillRecord, TOOL_SKILL_PREFIX, toolSkills } from "./skills.js";

const MAX_PAGE = 100;
/** Agents read per workspace for a listing (a larger workspace lists its first ones). */
const MAX_AGENTS = 1000;

function skillToProto(skill: SkillRecord): Skill {
  return create(SkillSchema, {
    id: skill.id,
    name: skill.name,
    description: skill.description,
    ...(skill.inputSchema ? { inputSchema: skill.inputSchema } : {}),
    ...(skill.outputSchema ? { outputSchema: skill.outputSchema } : {}),
    source: skill.source,
    version: skill.version,
    capabilities: skill.capabilities,
    requiresApproval: skill.requiresApproval,
    metadata: skill.metadata,
  });
}

/** The handlers: agents from `store`, tools from `tools`. */
export function createSkillHandlers(
  store: Pick<TaskStore, "listAgents" | "getAgent">,
  tools: readonly HarnessTool[],
): ServiceImpl<typeof SkillService> {
  const tooling = toolSkills(tools);

  function workspaceOf(requested: string, context: Parameters<typeof callerOf>[0]) {
    const caller = callerOf(context);
    const workspaceId = requested || caller?.workspaceId || "";
    if (!workspaceId) throw errors.invalid("workspace_id is required", "workspace_id");
    if (caller && workspaceId !== caller.workspaceId && !caller.scopes.includes("*")) {
      throw errors.notFound("workspace", workspaceId);
    }
    return { workspaceId, scope: caller && !caller.scopes.includes("*") ? workspaceId : undefined };
  }

  async function agentsOf(workspaceId: string, scope: string | undefined) {
    const agents = [];
    let pageToken = "";
    do {
      const page = await store.listAgents(workspaceId, { pageSize: 100, pageToken }, scope);
      agents.push(...page.items);
      pageToken = page.nextPageToken;
    } while (pageToken && agents.length < MAX_AGENTS);
    return agents;
  }

  return {
    async listSkills(request, context) {
      const { workspaceId, scope } = workspaceOf(request.workspaceId, context);
      const all = [...(await agentsOf(workspaceId, scope)).map(agentSkill), ...tooling];
      const offset = request.pageToken ? Number(request.pageToken) : 0;
      if (!Number.isSafeInteger(offset) || offset < 0) {
        throw errors.invalid("page_token is not one this service gave", "page_token");
      }
      const limit = Math.min(Math.max(request.pageSize || 50, 1), MAX_PAGE);
      const page = all.slice(offset, offset + limit);
      return {
        skills: page.map(skillToProto),
        nextPageToken: offset + limit < all.length ? String(offset + limit) : "",
      };
    },

    async getSkill(request, context) {
      const id = request.skillId;
      if (id.startsWith(TOOL_SKILL_PREFIX)) {
        const skill = tooling.find((s) => s.id === id);
        if (!skill) throw errors.notFound("skill", id);
        return { skill: skillToProto(skill) };
      }
      const { workspaceId, scope } = workspaceOf(request.workspaceId, context);
      const agent = id
        ? await store.getAgent(id, scope ?? workspaceId).catch(() => undefined)
        : undefined;
      if (!agent) throw errors.notFound("skill", id);
      return { skill: skillToProto(agentSkill(agent)) };
    },
  };
}
