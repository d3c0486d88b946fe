/**
 * Skills (Harn v1 "Skill"), derived — never a second list to keep in step:
 *
 * | source                        | id              | input / output schema                       |
 * |-------------------------------|-----------------|---------------------------------------------|
 * | an agent (persona)            | its agent id    | a chat message in; its reply out             |
 * | a harness tool (declared)     | `tool:<name>`   | the tool's declared input (and output) schema |
 *
 * Tools are the deployment's (`TRELLIS_HARNESS_TOOLS`) plus the built-in
 * ones (memory, `ask_user`); an agent's skill lists the tools it may use as
 * capabilities.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { type Agent, AutonomyTier } from "@trellis/contracts/tasks";
import { ASK_USER_TOOL, type HarnessTool, MEMORY_TOOLS } from "@trellis/execution";

/** One skill, before it becomes a proto message. */
export interface SkillRecord {
  id: string;
  name: string;
  description: string;
  inputSchema: JsonObject | undefined;
  outputSchema: JsonObject | undefined;
  source: "agent" | "tool";
  version: string;
  capabilities: string[];
  requiresApproval: boolean;
  metadata: JsonObject;
}

/** What an agent takes: one message (text, or parts as the REST surface writes them). */
const AGENT_INPUT: JsonObject = {
  type: "object",
  properties: {
    content: { type: "string", description: "the message text" },
    parts: { type: "array", items: { type: "object" } },
  },
  anyOf: [{ required: ["content"] }, { required: ["parts"] }],
};

/** What an agent answers: its reply messages. */
const AGENT_OUTPUT: JsonObject = {
  type: "object",
  properties: {
    messages: {
      type: "array",
      items: {
        type: "object",
        properties: { role: { type: "string" }, parts: { type: "array" } },
      },
    },
  },
};

/** Prefix of a tool skill's id. */
export const TOOL_SKILL_PREFIX = "tool:";

/** The skill of an agent. */
export function agentSkill(agent: Agent): SkillRecord {
  return {
    id: agent.id,
    name: agent.name || agent.id,
    description: agent.description,
    inputSchema: AGENT_INPUT,
    outputSchema: AGENT_OUTPUT,
    source: "agent",
    version: agent.version,
    capabilities: agent.tools.map((name) => `${TOOL_SKILL_PREFIX}${name}`),
    requiresApproval: agent.autonomyTier === AutonomyTier.ACT_WITH_APPROVAL,
    metadata: { backend: agent.backend },
  };
}

/** The skill of a harness tool. */
export function toolSkill(tool: HarnessTool): SkillRecord {
  return {
    id: `${TOOL_SKILL_PREFIX}${tool.name}`,
    name: tool.name,
    description: tool.description,
    inputSchema: tool.inputSchema,
    outputSchema: tool.outputSchema,
    source: "tool",
    version: "",
    capabilities: [],
    requiresApproval: tool.requiresApproval ?? false,
    metadata: { deterministic: tool.deterministic ?? false },
  };
}

/** Every tool skill: the deployment's tools, then the built-in ones it does not shadow. */
export function toolSkills(tools: readonly HarnessTool[]): SkillRecord[] {
  const builtins: HarnessTool[] = [
    ...MEMORY_TOOLS,
    {
      name: ASK_USER_TOOL.name,
      description: ASK_USER_TOOL.description,
      inputSchema: ASK_USER_TOOL.parameters,
      outputSchema: { type: "string", description: "the user's answer" },
      run: () => null,
    },
  ];
  const names = new Set(tools.map((t) => t.name));
  return [...tools, ...builtins.filter((t) => !names.has(t.name))].map(toolSkill);
}
