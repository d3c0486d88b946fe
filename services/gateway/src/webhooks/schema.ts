/**
 * Webhook tables (schema `gateway`): subscriptions and the durable delivery
 * queue.
 */
import type { Kysely, Migration } from "kysely";

/**
 * One subscription: events of `workspace_id` whose kind matches one of
 * `event_types` (space-separated: `task.completed`, `task.*`, `*`) are POSTed
 * to `url`, signed with `secret`. The secret must be usable for signing: it is
 * sealed with `TRELLIS_WEBHOOK_SECRET_KEY` when that is set (`SecretBox` of `@trellis/runtime`),
 * else kept as given.
 */
export interface WebhookSubscriptionTable {
  id: string;
  workspace_id: string;
  url: string;
  secret: string;
  event_types: string;
  description: string;
  created_by: string;
  created_at: Date;
  deleted_at: Date | null;
}

/**
 * One delivery: an event for a subscription. Its id (`msg_…`, the
 * `webhook-id` header) is derived from both, so an event seen twice by the
 * consumer is queued once. `state`: `pending` (to send at
 * `next_attempt_at`, claimed by a replica until `lease_until`), `delivered`,
 * `failed` (gave up after the last attempt), `canceled` (subscription deleted).
 */
export interface WebhookDeliveryTable {
  id: string;
  subscription_id: string;
  workspace_id: string;
  event_id: string;
  event_type: string;
  body: string;
  state: "pending" | "delivered" | "failed" | "canceled";
  attempts: number;
  next_attempt_at: Date;
  lease_until: Date | null;
  last_status: number | null;
  last_error: string | null;
  created_at: Date;
  delivered_at: Date | null;
}

export interface WebhookDatabase {
  webhook_subscriptions: WebhookSubscriptionTable;
  webhook_deliveries: WebhookDeliveryTable;
}

export const webhookMigrations: Record<string, Migration> = {
  "2026_11_26_002_create_webhooks": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("webhook_subscriptions")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("workspace_id", "text", (c) => c.notNull())
        .addColumn("url", "text", (c) => c.notNull())
        .addColumn("secret", "text", (c) => c.notNull())
        .addColumn("event_types", "text", (c) => c.notNull())
        .addColumn("description", "text", (c) => c.notNull())
        .addColumn("created_by", "text", (c) => c.notNull())
        .addColumn("created_at", "timestamptz", (c) => c.notNull())
        .addColumn("deleted_at", "timestamptz")
        .execute();
      await db.schema
        .createIndex("webhook_subscriptions_workspace_idx")
        .on("webhook_subscriptions")
        .columns(["workspace_id", "created_at"])
        .execute();
      await db.schema
        .createTable("webhook_deliveries")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("subscription_id", "text", (c) => c.notNull())
        .addColumn("workspace_id", "text", (c) => c.notNull())
        .addColumn("event_id", "text", (c) => c.notNull())
        .addColumn("event_type", "text", (c) => c.notNull())
        .addColumn("body", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull())
        .addColumn("attempts", "integer", (c) => c.notNull())
        .addColumn("next_attempt_at", "timestamptz", (c) => c.notNull())
        .addColumn("lease_until", "timestamptz")
        .addColumn("last_status", "integer")
        .addColumn("last_error", "text")
        .addColumn("created_at", "timestamptz", (c) => c.notNull())
        .addColumn("delivered_at", "timestamptz")
        .execute();
      await db.schema
        .createIndex("webhook_deliveries_due_idx")
        .on("webhook_deliveries")
        .columns(["state", "next_attempt_at"])
        .execute();
      await db.schema
        .createIndex("webhook_deliveries_subscription_idx")
        .on("webhook_deliveries")
        .columns(["subscription_id", "created_at"])
        .execute();
    },
  },
};
