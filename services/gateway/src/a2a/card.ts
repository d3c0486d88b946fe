/**
 * The A2A agent card of a Trellis agent: one JSON-RPC interface at
 * `/a2a/{agent_id}` on the gateway, bearer authentication (an API key or an
 * OAuth2 access token), streaming, no push notifications, text and JSON in
 * and out.
 */

import { AgentCard } from "@a2a-js/sdk";
import type { JsonObject } from "@bufbuild/protobuf";
import type { Agent } from "@trellis/contracts/tasks";

/** The A2A protocol version this gateway serves. */
export const a2aProtocolVersion = "1.0";

/** Id of the workspace default agent (the tasks service's `DEFAULT_AGENT_ID`). */
export const defaultAgentId = "agent_echo";

export const a2aPathOf = (agentId: string) => `/a2a/${encodeURIComponent(agentId)}`;

/** The card of `agent`, served from `base` (the gateway's public URL). */
export function agentCardOf(agent: Agent, base: string): AgentCard {
  const description =
    agent.description ||
    `Trellis agent ${agent.name || agent.id}: a conversation (contextId) is a Trellis session, a task a Trellis task.`;
  return {
    name: agent.name || agent.id,
    description,
    supportedInterfaces: [
      {
        url: `${base}${a2aPathOf(agent.id)}`,
        protocolBinding: "JSONRPC",
        tenant: "",
        protocolVersion: a2aProtocolVersion,
      },
    ],
    provider: { organization: "Trellis", url: base },
    version: agent.version || "1",
    capabilities: {
      streaming: true,
      pushNotifications: false,
      extensions: [],
      extendedAgentCard: false,
    },
    securitySchemes: {
      bearer: {
        scheme: {
          $case: "httpAuthSecurityScheme",
          value: {
            scheme: "Bearer",
            bearerFormat: "Trellis API key or OAuth2 access token",
            description:
              "A Trellis API key or OAuth2 access token of the agent's workspace, with tasks:write (send, cancel), tasks:read (get) and events:read (stream, resubscribe); sessions:write to start a new context.",
          },
        },
      },
    },
    securityRequirements: [{ schemes: { bearer: { list: [] } } }],
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain", "application/json"],
    skills: [
      {
        id: agent.id,
        name: agent.name || agent.id,
        description,
        tags: agent.backend ? [agent.backend] : [],
        examples: [],
        inputModes: [],
        outputModes: [],
        securityRequirements: [],
      },
    ],
    signatures: [],
  };
}

/** The card as JSON (A2A's ProtoJSON form). */
export function agentCardJson(card: AgentCard): JsonObject {
  return AgentCard.toJSON(card) as JsonObject;
}
