/**
 * Skills (`/v1/skills`, Harn v1 "Skill"): what the workspace's agents and
 * the deployment's tools expose, with their JSON Schemas — derived by the
 * tasks service's `SkillService` from agent definitions and tool
 * declarations. The agent card lists the same skills.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { type Skill, SkillService } from "@trellis/contracts/tasks";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import { ok, param, required } from "./common.js";
import { okPage, pageOf } from "./paging.js";

/** A skill as Harn JSON (`created_at` / `updated_at`: when this gateway started; skills are derived). */
export function skillJson(skill: Skill, at: string): JsonObject {
  return {
    id: skill.id,
    object: "skill",
    created_at: at,
    updated_at: at,
    metadata: skill.metadata ?? {},
    name: skill.name,
    description: skill.description,
    input_schema: skill.inputSchema ?? null,
    output_schema: skill.outputSchema ?? null,
    source: skill.source || null,
    version: skill.version || null,
    capabilities: [...skill.capabilities],
    requires_approval: skill.requiresApproval,
    deprecated: false,
  };
}

async function listSkills(call: RestCall): Promise<RestResponse> {
  const response = await call.ports.clients
    .get(SkillService)
    .listSkills(pageOf(call), call.options());
  const at = call.ports.startedAt.toISOString();
  return okPage(response.skills, (s) => skillJson(s, at), response.nextPageToken);
}

async function getSkill(call: RestCall): Promise<RestResponse> {
  const id = param(call, "skill_id");
  const { skill } = await call.ports.clients
    .get(SkillService)
    .getSkill({ skillId: id }, call.options());
  return ok(skillJson(required(skill, "skill", id), call.ports.startedAt.toISOString()));
}

/** The skill routes (registered in `index.ts`). */
export const skillRoutes: readonly RouteSpec[] = [
  { method: "GET", path: "/v1/skills", scope: "agents:read", handle: listSkills },
  { method: "GET", path: "/v1/skills/{skill_id}", scope: "agents:read", handle: getSkill },
];
