/** Discovery: `GET /v1` and the agent card (public: no version header, no key). */
import type { JsonObject } from "@bufbuild/protobuf";
import { ReceiptService } from "@trellis/contracts/receipts";
import { type Agent, AgentService, type Skill, SkillService } from "@trellis/contracts/tasks";
import { requestIdHeader } from "@trellis/runtime";
import { agentCardJson, agentCardOf, defaultAgentId } from "../../a2a/card.js";
import { currentProtocolVersion, supportedProtocolVersions } from "../../domain/protocol.js";
import type { RestCall, RoutePorts } from "../context.js";
import type { RestResponse } from "../io.js";
import { ok } from "./common.js";
import { skillJson } from "./skills.js";

/** `GET /v1`: what this server speaks (Harn "Discovery"). */
export function discoveryJson(options: { receipts: boolean }): JsonObject {
  return {
    object: "protocol_discovery",
    protocol_family: "harn_agents_protocol",
    current_version: currentProtocolVersion,
    supported_versions: [...supportedProtocolVersions],
    capabilities: {
      rest: true,
      sse: true,
      // ws/upgrade.ts: /v1/sessions/{id}/ws and the SSE paths upgrade.
      websocket: true,
      receipts: options.receipts,
      // Replay is the tasks service's (POST /v1/tasks/{id}/replay), always deployed.
      replay: true,
    },
  };
}

// Whether the receipts service answers, remembered briefly: discovery must be
// truthful about a service that may not be deployed.
export const probes = new WeakMap<object, { at: number; value: Promise<boolean> }>();

export function receiptsAvailable(call: RestCall): Promise<boolean> {
  return receiptsServed(call.ports, call.requestId);
}

/** {@link receiptsAvailable} for a caller that has the ports but no REST call (gRPC). */
export function receiptsServed(ports: RoutePorts, requestId: string): Promise<boolean> {
  const now = Date.now();
  const last = probes.get(ports);
  if (last !== undefined && now - last.at < 30_000) return last.value;
  const value = ports.clients
    .get(ReceiptService)
    .getPublicKeys({}, { timeoutMs: 1000, headers: { [requestIdHeader]: requestId } })
    .then(
      () => true,
      () => false,
    );
  probes.set(ports, { at: now, value });
  return value;
}

export function publicBaseUrl(
  call: Pick<RestCall, "req"> & { ports: Pick<RestCall["ports"], "config"> },
): string {
  const configured = call.ports.config.TRELLIS_PUBLIC_URL;
  if (configured) return configured.replace(/\/+$/, "");
  const host = call.req.headers.host ?? call.req.headers[":authority"];
  const name = typeof host === "string" && /^[A-Za-z0-9.:[\]-]+$/.test(host) ? host : "localhost";
  return `http://${name}`;
}

/** The default agent among the default workspace's agents (a stand-in when they cannot be listed). */
function defaultAgent(agents: readonly Agent[]): Agent {
  return (
    agents.find((agent) => agent.id === defaultAgentId) ??
    ({
      id: defaultAgentId,
      name: "echo",
      description: "",
      version: "",
      backend: "scripted",
    } as Agent)
  );
}

export async function cardAgents(call: RestCall): Promise<Agent[]> {
  try {
    const response = await call.ports.clients
      .get(AgentService)
      .listAgents(
        { workspaceId: call.ports.config.TRELLIS_DEFAULT_WORKSPACE, pageSize: 100 },
        { timeoutMs: 2000, headers: { "x-request-id": call.requestId } },
      );
    return response.agents;
  } catch {
    // The card is discovery: it must answer even when personas cannot be listed.
    return [];
  }
}

/** The skills of the default workspace's agents and of the deployment's tools (none when unreachable). */
async function cardSkills(call: RestCall): Promise<Skill[]> {
  try {
    const response = await call.ports.clients
      .get(SkillService)
      .listSkills(
        { workspaceId: call.ports.config.TRELLIS_DEFAULT_WORKSPACE, pageSize: 100 },
        { timeoutMs: 2000, headers: { "x-request-id": call.requestId } },
      );
    return response.skills;
  } catch {
    return [];
  }
}

export async function agentCard(call: RestCall): Promise<RestResponse> {
  const base = publicBaseUrl(call);
  const [agents, receipts] = await Promise.all([cardAgents(call), receiptsAvailable(call)]);
  const started = call.ports.startedAt.toISOString();
  const description =
    "Trellis hosts AI agents behind sessions, tasks, an append-only event log and artifacts " +
    "(Harn Agents Protocol: the Core level — REST + SSE, API keys — plus, of the Extended " +
    "level, OAuth2 client credentials, WebSocket sessions, personas, workspaces, quotas, " +
    "vaults, memory, skills, artifact registration, branches and connectors).";
  const skills = (await cardSkills(call)).map((skill) => skillJson(skill, started));
  return ok({
    id: "trellis",
    object: "harn_agent_card",
    created_at: started,
    updated_at: started,
    metadata: {},
    name: "Trellis",
    description,
    protocol_version: currentProtocolVersion,
    // The A2A card of the workspace default agent (`/.well-known/agent-card.json`).
    a2a_card: agentCardJson(agentCardOf(defaultAgent(agents), base)),
    skills,
    harn_interfaces: [
      { transport: "rest", url: `${base}/v1` },
      { transport: "sse", url: `${base}/v1/sessions/{session_id}/events/stream` },
      {
        transport: "websocket",
        url: `${base.replace(/^http/, "ws")}/v1/sessions/{session_id}/ws`,
      },
    ],
    persona_ids: agents.map((a) => a.id),
    capabilities: [
      "sessions",
      "tasks",
      "messages",
      "events",
      "artifacts",
      "outcomes",
      "sse",
      "websocket",
      "webhooks",
      "quotas",
      "branches",
      "connectors",
      "idempotency",
      "memory",
      "skills",
      ...(receipts ? ["receipts"] : []),
    ],
    auth_schemes: ["bearer"],
    receipt_policy: null,
    quotas: [],
    provider: { organization: "Trellis", url: base },
    public_url: base,
    signature: null,
  });
}
