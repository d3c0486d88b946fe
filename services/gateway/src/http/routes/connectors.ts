/**
 * Connectors (Harn v1 Extended) and their delivery endpoint.
 *
 * A provider (or the relay in front of it) sends each delivery to
 * `POST /v1/connectors/{connector_id}/deliveries` with a bearer API key of
 * the connector's workspace holding `connectors:deliver` — a key that can
 * do nothing else. A delivery id seen before answers 200 with the first
 * result (`deduplicated: true`); a new one 201.
 */
import { ConnectorService } from "@trellis/contracts/tasks";
import {
  connectorStatusNames,
  connectorToHarn,
  deliveryModeNames,
  deliveryToHarn,
  parseConnectorStatus,
  parseDeliveryMode,
} from "../../domain/harn-extended-json.js";
import { JsonReader } from "../../domain/json-input.js";
import { agentPolicyOf, ensureRunAllowed } from "../../policy/agent-policy.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import {
  created,
  ok,
  param,
  queryWorkspace,
  required,
  visible,
  visibleSession,
  workspaceOf,
} from "./common.js";
import { okPage, pageOf } from "./paging.js";

async function listConnectors(call: RestCall): Promise<RestResponse> {
  const response = await call.ports.clients
    .get(ConnectorService)
    .listConnectors({ workspaceId: queryWorkspace(call), ...pageOf(call) }, call.options());
  return okPage(response.connectors, connectorToHarn, response.nextPageToken);
}

async function createConnector(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const status = body.enum("status", connectorStatusNames);
  const mode = body.enum("delivery_mode", deliveryModeNames);
  const metadata = body.object("metadata");
  const targetPersonaId = body.string("target_persona_id") ?? "";
  const targetSessionId = body.string("target_session_id") ?? "";
  await ensureTargetAllowed(call, targetPersonaId, targetSessionId, "target_persona_id");
  const { connector } = await call.ports.clients.get(ConnectorService).createConnector(
    {
      workspaceId: workspaceOf(call, body.string("workspace_id")),
      provider: body.requiredString("provider"),
      eventKinds: body.strings("event_kinds") ?? [],
      status: status === undefined ? 0 : parseConnectorStatus(status),
      deliveryMode: mode === undefined ? 0 : parseDeliveryMode(mode),
      targetPersonaId,
      targetSessionId,
      idempotencyKey: call.idempotencyKey,
      ...(metadata ? { metadata } : {}),
    },
    call.options(),
  );
  return created(connectorToHarn(required(connector, "connector", "")));
}

/**
 * A connector's deliveries run its target persona, else its target session's
 * agent: a restricted credential must be allowed that agent to create the
 * connector or deliver to it (a target session it cannot see: 404).
 */
async function ensureTargetAllowed(
  call: RestCall,
  personaId: string,
  sessionId: string,
  paramName: string,
): Promise<void> {
  await ensureRunAllowed(
    call.caller,
    personaId,
    async () => (sessionId === "" ? "" : (await visibleSession(call, sessionId)).agentId),
    paramName,
  );
}

async function visibleConnector(call: RestCall, id: string) {
  const { connector } = await call.ports.clients
    .get(ConnectorService)
    .getConnector({ connectorId: id }, call.options());
  return visible(call, connector, "connector", id);
}

async function getConnector(call: RestCall): Promise<RestResponse> {
  return ok(connectorToHarn(await visibleConnector(call, param(call, "connector_id"))));
}

/** Changes the status (pause, resume, disable); the only field a connector lets change. */
async function updateConnector(call: RestCall): Promise<RestResponse> {
  const id = param(call, "connector_id");
  const body = JsonReader.body(call.body);
  const status = body.enum("status", connectorStatusNames);
  const reason = body.string("reason") ?? "";
  // The tasks service answers 404 for a connector of another workspace.
  const { connector } = await call.ports.clients
    .get(ConnectorService)
    .updateConnector(
      { connectorId: id, status: status === undefined ? 0 : parseConnectorStatus(status), reason },
      call.options(),
    );
  return ok(connectorToHarn(required(connector, "connector", id)));
}

async function deliver(call: RestCall): Promise<RestResponse> {
  const id = param(call, "connector_id");
  const body = JsonReader.body(call.body);
  const payload = body.object("payload");
  if (agentPolicyOf(call.caller) !== undefined) {
    const target = await visibleConnector(call, id);
    await ensureTargetAllowed(call, target.targetPersonaId, target.targetSessionId, "connector_id");
  }
  const request = {
    connectorId: id,
    deliveryId: body.requiredString("delivery_id"),
    eventKind: body.requiredString("event_kind"),
    text: body.string("text") ?? "",
    ...(payload ? { payload } : {}),
  };
  const response = await call.ports.clients
    .get(ConnectorService)
    .deliverConnectorEvent(request, call.options());
  const delivery = deliveryToHarn(
    required(response.delivery, "delivery", request.deliveryId),
    response.deduplicated,
  );
  return response.deduplicated ? ok(delivery) : created(delivery);
}

/** The connector routes (each declares its rule, `scope`). */
export const connectorRoutes: readonly RouteSpec[] = [
  { method: "GET", path: "/v1/connectors", scope: "connectors:read", handle: listConnectors },
  {
    method: "POST",
    path: "/v1/connectors",
    scope: "connectors:write",
    write: true,
    handle: createConnector,
  },
  {
    method: "GET",
    path: "/v1/connectors/{connector_id}",
    scope: "connectors:read",
    handle: getConnector,
  },
  {
    method: "POST",
    path: "/v1/connectors/{connector_id}",
    scope: "connectors:write",
    write: true,
    handle: updateConnector,
  },
  {
    method: "POST",
    path: "/v1/connectors/{connector_id}/deliveries",
    scope: "connectors:deliver",
    write: true,
    handle: deliver,
  },
];
