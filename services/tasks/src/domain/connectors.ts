/**
 * Connectors: the rules of their fields and how a provider delivery becomes
 * a message (Harn v1 "Connector": provider activity normalized into tasks or
 * messages, deduplicated by the provider's delivery id). Pure: no I/O.
 *
 * | delivery field | rule                                                    |
 * |----------------|---------------------------------------------------------|
 * | delivery_id    | required, 1…200 characters: the dedupe key              |
 * | event_kind     | required; one of the connector's `event_kinds` (if any) |
 * | payload        | a JSON object of at most {@link MAX_PAYLOAD_BYTES}       |
 * | text           | optional, at most {@link MAX_TEXT_CHARS} characters     |
 */
import { create, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { type Event, type Message, MessageSchema, Role } from "@trellis/contracts/core";
import { type Connector, ConnectorStatus } from "@trellis/contracts/tasks";
import { conflict, invalidRequest, payloadTooLarge } from "./errors.js";
import { dataEvent, type EventScope } from "./events.js";
import { newId } from "./ids.js";

/** Largest delivery payload, as compact JSON (UTF-8 bytes). */
export const MAX_PAYLOAD_BYTES = 64 * 1024;
/** Longest explicit message text of a delivery. */
export const MAX_TEXT_CHARS = 16 * 1024;
/** Longest provider delivery id. */
export const MAX_DELIVERY_ID_CHARS = 200;
/** Most event kinds one connector declares. */
export const MAX_EVENT_KINDS = 100;

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,99}$/;

/** A provider or event kind name: 1…100 of `[A-Za-z0-9_.:/-]`, starting alphanumeric. */
export function checkName(value: string, param: string): string {
  if (!NAME.test(value)) {
    throw invalidRequest(
      `${param} must be 1-100 characters of letters, digits and _.:/- (got ${JSON.stringify(value.slice(0, 120))})`,
      param,
    );
  }
  return value;
}

/** The declared event kinds: valid names, no repeats, at most {@link MAX_EVENT_KINDS}. */
export function checkEventKinds(kinds: readonly string[]): string[] {
  if (kinds.length > MAX_EVENT_KINDS) {
    throw invalidRequest(`at most ${MAX_EVENT_KINDS} event_kinds`, "event_kinds");
  }
  const seen = new Set<string>();
  kinds.forEach((kind, i) => {
    checkName(kind, `event_kinds[${i}]`);
    if (seen.has(kind)) throw invalidRequest(`event kind ${kind} is listed twice`, "event_kinds");
    seen.add(kind);
  });
  return [...kinds];
}

/** A status a client may set (not UNSPECIFIED, a known value). */
export function checkStatus(status: ConnectorStatus, param = "status"): ConnectorStatus {
  if (status === ConnectorStatus.UNSPECIFIED || ConnectorStatus[status] === undefined) {
    throw invalidRequest("status must be ACTIVE, PAUSED, FAILED or DISABLED", param);
  }
  return status;
}

/** A delivery as a client sent it. */
export interface DeliveryInput {
  deliveryId: string;
  eventKind: string;
  payload: JsonObject | undefined;
  text: string;
}

/** A checked delivery: its fields and the message it becomes. */
export interface NormalizedDelivery {
  deliveryId: string;
  eventKind: string;
  message: Message;
}

/**
 * Checks a delivery against its connector and builds the user message it
 * becomes. Throws `invalid_request` / `payload_too_large` for a malformed
 * delivery and `conflict` when the connector does not take deliveries now
 * (not ACTIVE): either way nothing has been stored.
 */
export function normalizeDelivery(connector: Connector, input: DeliveryInput): NormalizedDelivery {
  if (connector.status !== ConnectorStatus.ACTIVE) {
    throw conflict(
      `connector ${connector.id} is ${ConnectorStatus[connector.status] ?? "not active"}; it takes no deliveries`,
      { connector_id: connector.id, status: ConnectorStatus[connector.status] ?? "" },
    );
  }
  const deliveryId = input.deliveryId;
  if (deliveryId.length === 0 || deliveryId.length > MAX_DELIVERY_ID_CHARS) {
    throw invalidRequest(
      `delivery_id is required (1-${MAX_DELIVERY_ID_CHARS} characters)`,
      "delivery_id",
    );
  }
  const eventKind = checkName(input.eventKind, "event_kind");
  if (connector.eventKinds.length > 0 && !connector.eventKinds.includes(eventKind)) {
    throw invalidRequest(
      `event kind ${eventKind} is not one of the connector's (${connector.eventKinds.join(", ")})`,
      "event_kind",
    );
  }
  const payload = input.payload ?? {};
  const json = JSON.stringify(payload);
  if (Buffer.byteLength(json, "utf8") > MAX_PAYLOAD_BYTES) {
    throw payloadTooLarge(`payload is larger than ${MAX_PAYLOAD_BYTES} bytes as JSON`, "payload");
  }
  if (input.text.length > MAX_TEXT_CHARS) {
    throw payloadTooLarge(`text is longer than ${MAX_TEXT_CHARS} characters`, "text");
  }
  const text = input.text.trim() || `${connector.provider} ${eventKind}\n${json}`;
  const message = create(MessageSchema, {
    id: newId("msg"),
    role: Role.USER,
    name: connector.provider,
    parts: [{ kind: { case: "text", value: { text } } }],
    metadata: deliveryFacts(connector, deliveryId, eventKind),
  });
  return { deliveryId, eventKind, message };
}

/** What every delivery's message and events say about where it came from. */
export function deliveryFacts(
  connector: Connector,
  deliveryId: string,
  eventKind: string,
): { [key: string]: JsonValue } {
  return {
    connector_id: connector.id,
    provider: connector.provider,
    delivery_id: deliveryId,
    event_kind: eventKind,
  };
}

/**
 * A `connector.*` event (Harn v1 "Connector events"): about the connector,
 * in the workspace, outside any session.
 */
export function connectorEvent(
  scope: EventScope,
  kind:
    | "connector.delivery_received"
    | "connector.delivery_deduped"
    | "connector.normalized"
    | "connector.task_submitted"
    | "connector.failed",
  connectorId: string,
  data: { [key: string]: JsonValue },
  taskId = "",
): Event {
  return dataEvent(scope, kind, { object: "connector", id: connectorId }, taskId, data);
}
