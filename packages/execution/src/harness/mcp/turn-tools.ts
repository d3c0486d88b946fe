/**
 * An agent's MCP servers as harness tools for one turn: {@link openTurnMcp}
 * reads the servers' vault credentials, connects (see {@link McpSession}) and
 * wraps each listed tool as a {@link HarnessTool} the tool loop handles like
 * a registry tool — same input check, same approval rules, same exactly-once
 * ledger — while the harness records its calls as MCP calls (the
 * `tool_started` event's `mcpServer`, the tool record's `mcp`).
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { ExecutionRequest, ExecutionResult } from "@trellis/adapter-sdk";
import {
  type HarnessEnvironment,
  loadVaultSecrets,
  SecretAccessError,
  VaultUnavailableError,
} from "../environment.js";
import type { HarnessTool } from "../tools.js";
import type { McpServerSpec, ResolvedMcpPolicy } from "./definition.js";
import { McpSession, type McpTool, McpToolError } from "./session.js";

/** A harness tool that calls an MCP server's tool. */
export interface McpHarnessTool extends HarnessTool {
  mcp: McpTool;
}

export function isMcpHarnessTool(tool: HarnessTool): tool is McpHarnessTool {
  return "mcp" in tool && typeof (tool as McpHarnessTool).mcp === "object";
}

/** Why a turn could not start with its MCP servers. */
export interface McpTurnFailure {
  category: "mcp_unavailable" | "mcp_credentials_unavailable" | "vault_unavailable";
  message: string;
  retryable: boolean;
}

/** The turn's MCP connections and their tools. */
export interface TurnMcp {
  session: McpSession;
  tools: McpHarnessTool[];
}

async function credentials(
  servers: readonly McpServerSpec[],
  environment: HarnessEnvironment,
  request: ExecutionRequest,
): Promise<Map<string, string>> {
  const names = servers.flatMap((s) =>
    s.transport.kind === "http" && s.transport.bearerSecret ? [s.transport.bearerSecret] : [],
  );
  const values = new Map<string, string>();
  if (names.length === 0) return values;
  const source = await loadVaultSecrets(
    environment,
    {
      taskId: request.taskId,
      toolCallId: "mcp:connect",
      workspaceId: request.workspaceId,
      agentId: request.agent.id,
    },
    request,
  );
  for (const name of names) {
    if (!source) {
      throw new SecretAccessError("secret_not_found", name, "this turn has no vault secrets");
    }
    values.set(name, source.read(name));
  }
  return values;
}

/**
 * Connects the agent's MCP servers for a turn. A failure is returned (the
 * turn fails with it), never thrown; nothing stays open after one.
 */
export async function openTurnMcp(
  servers: readonly McpServerSpec[],
  request: ExecutionRequest,
  environment: HarnessEnvironment,
  policy: ResolvedMcpPolicy,
): Promise<TurnMcp | McpTurnFailure> {
  let secrets: Map<string, string>;
  try {
    secrets = await credentials(servers, environment, request);
  } catch (error) {
    if (error instanceof VaultUnavailableError) {
      return { category: "vault_unavailable", message: error.message, retryable: true };
    }
    if (error instanceof SecretAccessError) {
      return {
        category: "mcp_credentials_unavailable",
        message: `an MCP server's bearer_secret: ${error.message}`,
        retryable: false,
      };
    }
    throw error;
  }
  let session: McpSession;
  try {
    session = await McpSession.open(servers, {
      policy,
      signal: request.signal,
      secret: (name) => secrets.get(name) as string,
    });
  } catch (error) {
    if (error instanceof McpToolError) {
      // A server that is down or slow now may be back on a retry; a refused
      // address or a bad tool list is not, but says so in the message.
      return { category: "mcp_unavailable", message: error.message, retryable: true };
    }
    return {
      category: "mcp_unavailable",
      message: `MCP servers could not be connected: ${error instanceof Error ? error.message : String(error)}`,
      retryable: true,
    };
  }
  const tools = session.tools.map(
    (tool): McpHarnessTool => ({
      name: tool.name,
      description: tool.description,
      inputSchema: tool.inputSchema,
      requiresApproval: tool.requiresApproval,
      mcp: tool,
      run: async (input: JsonObject, context) =>
        (await session.call(tool.name, input, context.signal)).text,
    }),
  );
  return { session, tools };
}

/**
 * Runs a turn with the agent's MCP servers' tools added to `tools`: connects
 * them first (a failure fails the turn, typed), closes them when the turn
 * ends however it ends. Without servers it only runs the turn.
 */
export async function runWithTurnMcp(
  servers: readonly McpServerSpec[],
  request: ExecutionRequest,
  environment: HarnessEnvironment,
  policy: ResolvedMcpPolicy,
  tools: Map<string, HarnessTool>,
  run: () => Promise<ExecutionResult>,
): Promise<ExecutionResult> {
  if (servers.length === 0) return run();
  const mcp = await openTurnMcp(servers, request, environment, policy);
  if ("category" in mcp) {
    if (request.signal.aborted) return { status: "cancelled", messages: [] };
    return {
      status: "failed",
      messages: [],
      category: mcp.category,
      message: `harness agent: ${mcp.message}`,
      retryable: mcp.retryable,
    };
  }
  try {
    for (const tool of mcp.tools) {
      if (tools.has(tool.name)) {
        return {
          status: "failed",
          messages: [],
          category: "agent_definition_invalid",
          message: `harness agent: the registry tool ${tool.name} has the name of an MCP server's tool`,
          retryable: false,
        };
      }
      tools.set(tool.name, tool);
    }
    return await run();
  } finally {
    await mcp.session.close();
  }
}
