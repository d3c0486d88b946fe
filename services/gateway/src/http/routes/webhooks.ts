/**
 * Webhook subscriptions of a workspace (`/v1/webhooks`): subscribe, list,
 * read, delete, and the latest deliveries. The signing secret is in the
 * answer to the subscription only. Delivery is `webhooks/dispatcher.ts`.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { errors } from "@trellis/runtime";
import { listJson } from "../../domain/harn-json.js";
import { JsonReader } from "../../domain/json-input.js";
import { parseWebhookUrl, resolveAllowed } from "../../webhooks/address-guard.js";
import { newWebhookSecret } from "../../webhooks/signing.js";
import type { DeliveryRow, SubscriptionRow } from "../../webhooks/store.js";
import type { RestCall, RouteSpec } from "../context.js";
import { jsonResponse, type RestResponse } from "../io.js";
import { ensureVisible, ok, param, queryString, queryWorkspace, workspaceOf } from "./common.js";
import { limitOf, okPage } from "./paging.js";

const defaultEventTypes = ["task.*", "session.*"];
const noStore = { "cache-control": "no-store" };

function facade(call: RestCall) {
  const webhooks = call.ports.webhooks;
  if (webhooks === undefined) throw errors.unavailable("webhooks");
  return webhooks;
}

function subscriptionJson(row: SubscriptionRow, secret?: string): JsonObject {
  return {
    id: row.id,
    object: "webhook",
    created_at: row.created_at.toISOString(),
    updated_at: row.created_at.toISOString(),
    metadata: {},
    workspace_id: row.workspace_id,
    url: row.url,
    event_types: row.event_types.split(" "),
    description: row.description,
    created_by: row.created_by,
    ...(secret === undefined ? {} : { secret }),
  };
}

function deliveryJson(row: DeliveryRow): JsonObject {
  return {
    id: row.id,
    object: "webhook_delivery",
    created_at: row.created_at.toISOString(),
    webhook_id: row.subscription_id,
    event_id: row.event_id,
    event_type: row.event_type,
    state: row.state,
    attempts: row.attempts,
    last_status: row.last_status,
    last_error: row.last_error,
    next_attempt_at: row.state === "pending" ? row.next_attempt_at.toISOString() : null,
    delivered_at: row.delivered_at?.toISOString() ?? null,
  };
}

/** `event_types`: kinds (`task.completed`), prefixes (`task.*`) or `*`. */
function eventTypesOf(body: JsonReader): string[] {
  const given = body.strings("event_types");
  if (given === undefined) return defaultEventTypes;
  if (given.length === 0 || given.length > 50) {
    throw errors.invalid("event_types must list 1–50 event kinds or patterns", "event_types");
  }
  for (const t of given) {
    if (!/^(\*|[a-z][a-z0-9_]*(\.[a-z0-9_]+)*(\.\*)?)$/.test(t) || t.length > 100) {
      throw errors.invalid(
        `${JSON.stringify(t.slice(0, 100))} is not an event kind (task.completed), a prefix pattern (task.*) or *`,
        "event_types",
      );
    }
  }
  return [...new Set(given)];
}

async function createWebhook(call: RestCall): Promise<RestResponse> {
  const webhooks = facade(call);
  const body = JsonReader.body(call.body);
  const url = parseWebhookUrl(
    body.requiredString("url"),
    webhooks.config.TRELLIS_WEBHOOKS_ALLOW_PRIVATE,
  );
  const eventTypes = eventTypesOf(body);
  const description = body.string("description") ?? "";
  if (description.length > 500) {
    throw errors.invalid("description is longer than 500 characters", "description");
  }
  const workspaceId = workspaceOf(call, body.string("workspace_id"));
  // Refuse private targets now (and again at every delivery).
  await resolveAllowed(url.hostname, webhooks.config.TRELLIS_WEBHOOKS_ALLOW_PRIVATE);
  const secret = newWebhookSecret();
  const row = await webhooks.store.create({
    workspaceId,
    url: url.href,
    secret,
    eventTypes,
    description,
    createdBy: call.caller.actorId,
  });
  webhooks.dispatcher.invalidate();
  call.ports.logger.info("webhook subscribed", {
    request_id: call.requestId,
    webhook_id: row.id,
    workspace_id: workspaceId,
    by: call.caller.actorId,
  });
  return jsonResponse(201, subscriptionJson(row, secret), noStore);
}

async function visibleWebhook(call: RestCall): Promise<SubscriptionRow> {
  const id = param(call, "webhook_id");
  const row = await facade(call).store.get(id);
  if (row === undefined) throw errors.notFound("webhook", id);
  ensureVisible(call, row.workspace_id, "webhook", id);
  return row;
}

async function listWebhooks(call: RestCall): Promise<RestResponse> {
  const webhooks = facade(call);
  const workspaceId = queryWorkspace(call);
  const limit = limitOf(call, 50);
  const cursor = queryString(call, "cursor");
  let after: SubscriptionRow | undefined;
  if (cursor !== undefined) {
    after = await webhooks.store.get(cursor);
    if (after === undefined || after.workspace_id !== workspaceId) {
      throw errors.invalid("cursor is not a webhook of this list", "cursor");
    }
  }
  const rows = await webhooks.store.list(workspaceId, limit + 1, after);
  const page = rows.slice(0, limit);
  return ok(
    listJson(
      page.map((r) => subscriptionJson(r)),
      { nextCursor: rows.length > limit ? page.at(-1)?.id : undefined },
    ),
  );
}

async function getWebhook(call: RestCall): Promise<RestResponse> {
  return ok(subscriptionJson(await visibleWebhook(call)));
}

async function deleteWebhook(call: RestCall): Promise<RestResponse> {
  const row = await visibleWebhook(call);
  const webhooks = facade(call);
  await webhooks.store.delete(row.id);
  webhooks.dispatcher.invalidate();
  return ok({ id: row.id, object: "webhook", deleted: true });
}

async function listDeliveries(call: RestCall): Promise<RestResponse> {
  const row = await visibleWebhook(call);
  const rows = await facade(call).store.deliveries(row.id, limitOf(call, 50));
  return okPage(rows, deliveryJson);
}

export const webhookRoutes: readonly RouteSpec[] = [
  { method: "GET", path: "/v1/webhooks", scope: "webhooks:read", handle: listWebhooks },
  // Not replayed by Idempotency-Key: the answer holds the signing secret (like API keys).
  { method: "POST", path: "/v1/webhooks", scope: "webhooks:write", handle: createWebhook },
  { method: "GET", path: "/v1/webhooks/{webhook_id}", scope: "webhooks:read", handle: getWebhook },
  {
    method: "DELETE",
    path: "/v1/webhooks/{webhook_id}",
    scope: "webhooks:write",
    handle: deleteWebhook,
  },
  {
    method: "GET",
    path: "/v1/webhooks/{webhook_id}/deliveries",
    scope: "webhooks:read",
    handle: listDeliveries,
  },
];
