/**
 * The agent definition of the built-in harness (backend "harness"):
 *
 * ```json
 * {
 *   "provider": "openai",
 *   "model": "gpt-4o-mini",
 *   "system": "You are a careful assistant.",
 *   "tools": ["get_weather", "send_email"],
 *   "require_approval": ["send_email"],
 *   "ask_user": true,
 *   "max_output_tokens": 1024,
 *   "temperature": 0,
 *   "stream": true,
 *   "budgets": { "max_steps": 8, "max_total_tokens": 50000 }
 * }
 * ```
 *
 * - `provider` — a provider the adapter was built with ("openai", "anthropic", …);
 *   where it is and its key come from the deployment, never from the definition.
 * - `model` — the provider's model id.
 * - `system` — the system prompt (optional).
 * - `tools` — registry tools the agent may call; when absent, the agent's own
 *   `tools` list (CreateAgent) is used.
 * - `require_approval` — tools that need a person's approval on this agent,
 *   on top of those the registry marks `requiresApproval` (policy can add
 *   approval, never remove it).
 * - `ask_user` — offer the model the built-in clarification tool `ask_user`
 *   (default false): calling it suspends the turn with the model's question
 *   until someone answers (see `clarification.ts`). It is not a registry tool,
 *   so it is never named in `tools`, and a registry tool of that name cannot
 *   be used beside it.
 * - `max_output_tokens` — per model call; required for Anthropic.
 * - `stream` — stream model answers (default true): text and thinking deltas
 *   are reported as they arrive.
 * - `context` — the tasks service's context compaction settings for this agent
 *   (`budget_tokens`, `warn_percent`, `keep_recent_turns`, `strategy`:
 *   "model" | "deterministic"; see `services/tasks/src/compaction/config.ts`).
 *   Not read by the harness; it must be an object.
 * - `mcp_servers` — MCP servers whose tools the agent may call (see
 *   `mcp/definition.ts`); `require_approval` may name their tools as
 *   `mcp__<server>__<tool>`.
 * - `budgets.max_steps` — model calls per turn, across suspensions (default 10);
 *   `budgets.max_total_tokens` — tokens (prompt + completion) per turn. Running
 *   out fails the turn with `budget_exceeded`.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { isRecord } from "@trellis/runtime";
import { ASK_USER } from "./clarification.js";
import {
  isMcpToolOf,
  McpDefinitionError,
  type McpServerSpec,
  parseMcpServers,
  type ResolvedMcpPolicy,
  resolveMcpPolicy,
} from "./mcp/definition.js";

/** A parsed harness definition. */
export interface HarnessDefinition {
  provider: string;
  model: string;
  system?: string;
  tools?: string[];
  requireApproval: string[];
  /** The built-in clarification tool is offered. */
  askUser: boolean;
  maxOutputTokens?: number;
  temperature?: number;
  stream: boolean;
  budgets: { maxSteps: number; maxTotalTokens?: number };
  /** MCP servers whose tools the agent may call (empty: none). */
  mcpServers: McpServerSpec[];
}

/** A problem in a harness definition, at `path` (dotted, below `agent.definition`). */
export class HarnessDefinitionError extends Error {
  constructor(
    message: string,
    readonly path: string,
  ) {
    super(`${path}: ${message}`);
    this.name = "HarnessDefinitionError";
  }
}

const KEYS = new Set([
  "provider",
  "model",
  "system",
  "tools",
  "require_approval",
  "ask_user",
  "max_output_tokens",
  "temperature",
  "stream",
  "budgets",
  "context",
  "mcp_servers",
]);
const BUDGET_KEYS = new Set(["max_steps", "max_total_tokens"]);

/** Default upper bound on model calls in one turn. */
export const DEFAULT_MAX_STEPS = 10;

function positiveInteger(value: unknown, path: string, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1 || value > max) {
    throw new HarnessDefinitionError(`must be an integer in 1…${max}`, path);
  }
  return value;
}

/** "no tool X", with a pointer to `ask_user` when X is the built-in. */
function noTool(name: string, path: string): HarnessDefinitionError {
  return new HarnessDefinitionError(
    name === ASK_USER
      ? `${ASK_USER} is the built-in clarification tool, not a registry tool: enable it with "${ASK_USER}": true`
      : `no tool ${name}`,
    path,
  );
}

function names(value: unknown, path: string): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string" || v === "")) {
    throw new HarnessDefinitionError("must be a list of tool names", path);
  }
  return value as string[];
}

/**
 * Validates a definition document. `knownProviders` are the providers the
 * adapter can reach; `knownTool` says whether the registry has a tool.
 */
export function parseHarnessDefinition(
  document: JsonObject,
  knownProviders: readonly string[],
  knownTool: (name: string) => boolean,
  mcpPolicy: ResolvedMcpPolicy = resolveMcpPolicy(),
): HarnessDefinition {
  for (const key of Object.keys(document)) {
    if (!KEYS.has(key)) {
      throw new HarnessDefinitionError(`unknown field (known: ${[...KEYS].join(", ")})`, key);
    }
  }
  const { provider, model, system, temperature, stream, budgets } = document;
  if (document.context !== undefined && !isRecord(document.context)) {
    throw new HarnessDefinitionError("must be an object", "context");
  }
  if (typeof provider !== "string" || !knownProviders.includes(provider)) {
    throw new HarnessDefinitionError(`must be one of ${knownProviders.join(", ")}`, "provider");
  }
  if (typeof model !== "string" || model.trim() === "") {
    throw new HarnessDefinitionError("must be a non-empty model id", "model");
  }
  if (system !== undefined && typeof system !== "string") {
    throw new HarnessDefinitionError("must be a string", "system");
  }
  let tools: string[] | undefined;
  if (document.tools !== undefined) {
    tools = names(document.tools, "tools");
    for (const [i, name] of tools.entries()) {
      if (!knownTool(name)) throw noTool(name, `tools[${i}]`);
    }
    if (new Set(tools).size !== tools.length) {
      throw new HarnessDefinitionError("names a tool twice", "tools");
    }
  }
  let mcpServers: McpServerSpec[] = [];
  if (document.mcp_servers !== undefined) {
    try {
      mcpServers = parseMcpServers(document.mcp_servers, mcpPolicy);
    } catch (error) {
      if (error instanceof McpDefinitionError) {
        throw new HarnessDefinitionError(error.detail, error.path);
      }
      throw error;
    }
  }
  const requireApproval =
    document.require_approval === undefined
      ? []
      : names(document.require_approval, "require_approval");
  for (const [i, name] of requireApproval.entries()) {
    if (!knownTool(name) && !isMcpToolOf(name, mcpServers)) {
      throw noTool(name, `require_approval[${i}]`);
    }
  }
  const askUser = document.ask_user ?? false;
  if (typeof askUser !== "boolean") {
    throw new HarnessDefinitionError("must be true or false", "ask_user");
  }
  if (askUser && knownTool(ASK_USER)) {
    // Two tools of one name: the model could not tell which one it calls.
    throw new HarnessDefinitionError(
      `the harness registry has its own tool named ${ASK_USER}; the built-in one cannot be enabled beside it`,
      "ask_user",
    );
  }
  const maxOutputTokens =
    document.max_output_tokens === undefined
      ? undefined
      : positiveInteger(document.max_output_tokens, "max_output_tokens", 1_000_000);
  if (provider === "anthropic" && maxOutputTokens === undefined) {
    // llm-provider §8.2.1: max_tokens is required and must not be invented.
    throw new HarnessDefinitionError("is required for the anthropic provider", "max_output_tokens");
  }
  if (
    temperature !== undefined &&
    (typeof temperature !== "number" || temperature < 0 || temperature > 2)
  ) {
    throw new HarnessDefinitionError("must be a number in 0…2", "temperature");
  }
  if (stream !== undefined && typeof stream !== "boolean") {
    throw new HarnessDefinitionError("must be true or false", "stream");
  }
  let maxSteps = DEFAULT_MAX_STEPS;
  let maxTotalTokens: number | undefined;
  if (budgets !== undefined) {
    if (!isRecord(budgets)) throw new HarnessDefinitionError("must be an object", "budgets");
    for (const key of Object.keys(budgets)) {
      if (!BUDGET_KEYS.has(key))
        throw new HarnessDefinitionError("unknown budget", `budgets.${key}`);
    }
    if (budgets.max_steps !== undefined) {
      maxSteps = positiveInteger(budgets.max_steps, "budgets.max_steps", 1000);
    }
    if (budgets.max_total_tokens !== undefined) {
      maxTotalTokens = positiveInteger(
        budgets.max_total_tokens,
        "budgets.max_total_tokens",
        100_000_000,
      );
    }
  }
  return {
    provider,
    model,
    ...(system !== undefined && system !== "" ? { system } : {}),
    ...(tools ? { tools } : {}),
    requireApproval,
    askUser,
    ...(maxOutputTokens !== undefined ? { maxOutputTokens } : {}),
    ...(typeof temperature === "number" ? { temperature } : {}),
    stream: stream ?? true,
    budgets: { maxSteps, ...(maxTotalTokens !== undefined ? { maxTotalTokens } : {}) },
    mcpServers,
  };
}
