/**
 * Harn JSON of the Extended resources the tasks service keeps: Branch,
 * Connector and what a connector delivery became. Pure codecs, like
 * `harn-json.ts`: enums are the generated names without their prefix,
 * lower-case where Harn spells them so (branch kinds), upper-case where it
 * does (connector status).
 */
import type { JsonObject } from "@bufbuild/protobuf";
import {
  type Branch,
  BranchKind,
  type Connector,
  type ConnectorDelivery,
  ConnectorDeliveryMode,
  ConnectorStatus,
} from "@trellis/contracts/tasks";
import { resourceHead, timestampJson } from "./harn-json.js";

/** "" → null: optional Harn ids. */
function orNull(value: string): string | null {
  return value === "" ? null : value;
}

/** Harn branch kinds, in BranchKind order. */
export const branchKindNames = ["workspace", "session", "task", "sandbox"] as const;

/** Harn connector statuses. */
export const connectorStatusNames = ["ACTIVE", "PAUSED", "FAILED", "DISABLED"] as const;

/** What a delivery becomes, as the REST surface spells it. */
export const deliveryModeNames = ["task", "message"] as const;

/** BranchKind of a Harn kind name. */
export function parseBranchKind(name: (typeof branchKindNames)[number]): BranchKind {
  return BranchKind[name.toUpperCase() as keyof typeof BranchKind];
}

/** ConnectorStatus of a Harn status name. */
export function parseConnectorStatus(name: (typeof connectorStatusNames)[number]): ConnectorStatus {
  return ConnectorStatus[name];
}

/** ConnectorDeliveryMode of a REST mode name. */
export function parseDeliveryMode(name: (typeof deliveryModeNames)[number]): ConnectorDeliveryMode {
  return name === "message" ? ConnectorDeliveryMode.MESSAGE : ConnectorDeliveryMode.TASK;
}

/** A Branch as Harn JSON (plus where it forked, which Harn leaves to implementations). */
export function branchToHarn(branch: Branch): JsonObject {
  return {
    ...resourceHead("branch", branch),
    workspace_id: branch.workspaceId,
    kind: BranchKind[branch.kind]?.toLowerCase() ?? "session",
    base_ref: branch.baseRef,
    parent_branch_id: orNull(branch.parentBranchId),
    session_id: orNull(branch.sessionId),
    task_id: orNull(branch.taskId),
    worktree_uri: null,
    created_by: orNull(branch.createdBy),
    merged_into: orNull(branch.mergedInto),
    parent_session_id: orNull(branch.parentSessionId),
    fork: {
      event_id: orNull(branch.forkedFromEventId),
      message_id: orNull(branch.forkedFromMessageId),
      message_count: Number(branch.forkedMessageCount),
    },
  };
}

/** A Connector as Harn JSON; `webhook` says where and how deliveries are sent. */
export function connectorToHarn(connector: Connector): JsonObject {
  const path = `/v1/connectors/${encodeURIComponent(connector.id)}/deliveries`;
  return {
    ...resourceHead("connector", connector),
    provider: connector.provider,
    workspace_id: connector.workspaceId,
    status: ConnectorStatus[connector.status] ?? "ACTIVE",
    status_reason: orNull(connector.statusReason),
    event_kinds: [...connector.eventKinds],
    dedupe_policy: { key: "delivery_id", scope: "connector", retention: "forever" },
    auth: { type: "bearer", scope: "connectors:deliver" },
    webhook: {
      delivery_path: path,
      delivers_as: connector.deliveryMode === ConnectorDeliveryMode.MESSAGE ? "message" : "task",
    },
    polling: { enabled: false },
    target_persona_id: orNull(connector.targetPersonaId),
    target_session_id: orNull(connector.targetSessionId),
  };
}

/** What one delivery became. */
export function deliveryToHarn(delivery: ConnectorDelivery, deduplicated: boolean): JsonObject {
  return {
    id: delivery.id,
    object: "connector_delivery",
    created_at: timestampJson(delivery.createdAt),
    connector_id: delivery.connectorId,
    workspace_id: delivery.workspaceId,
    delivery_id: delivery.deliveryId,
    event_kind: delivery.eventKind,
    state: delivery.state,
    task_id: orNull(delivery.taskId),
    session_id: orNull(delivery.sessionId),
    message_id: orNull(delivery.messageId),
    failure: orNull(delivery.failure),
    deduplicated,
  };
}
