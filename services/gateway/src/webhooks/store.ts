/** Webhook subscriptions and the delivery queue on PostgreSQL or PGlite. */
import { randomBytes } from "node:crypto";
import type { SecretBox } from "@trellis/runtime";
import type { Database } from "@trellis/storage";
import type { Kysely, Selectable } from "kysely";
import { sha256Hex } from "../domain/canonical-json.js";
import { webhookSecretBox } from "./config.js";
import type { WebhookDatabase, WebhookDeliveryTable, WebhookSubscriptionTable } from "./schema.js";

export type SubscriptionRow = Selectable<WebhookSubscriptionTable>;
export type DeliveryRow = Selectable<WebhookDeliveryTable>;

/** A delivery to queue. */
export interface NewDelivery {
  subscriptionId: string;
  workspaceId: string;
  eventId: string;
  eventType: string;
  body: string;
}

/** The id of the delivery of `eventId` to `subscriptionId` (stable: the dedup key). */
export function deliveryIdOf(subscriptionId: string, eventId: string): string {
  return `msg_${sha256Hex(`${subscriptionId.length}:${subscriptionId}|${eventId}`).slice(0, 32)}`;
}

export class WebhookStore {
  private readonly db: Kysely<WebhookDatabase>;

  constructor(
    database: Database<unknown>,
    schema: string,
    private readonly box: SecretBox = webhookSecretBox(undefined),
  ) {
    this.db = (database.kysely as unknown as Kysely<WebhookDatabase>).withSchema(schema);
  }

  async create(input: {
    workspaceId: string;
    url: string;
    secret: string;
    eventTypes: readonly string[];
    description: string;
    createdBy: string;
  }): Promise<SubscriptionRow> {
    const row: SubscriptionRow = {
      id: `whk_${randomBytes(12).toString("hex")}`,
      workspace_id: input.workspaceId,
      url: input.url,
      secret: input.secret,
      event_types: input.eventTypes.join(" "),
      description: input.description,
      created_by: input.createdBy,
      created_at: new Date(),
      deleted_at: null,
    };
    await this.db
      .insertInto("webhook_subscriptions")
      .values({ ...row, secret: this.box.seal(input.secret) })
      .execute();
    return row;
  }

  async get(id: string): Promise<SubscriptionRow | undefined> {
    return this.db
      .selectFrom("webhook_subscriptions")
      .selectAll()
      .where("id", "=", id)
      .where("deleted_at", "is", null)
      .executeTakeFirst();
  }

  /** A workspace's subscriptions, oldest first, after the cursor (an id). */
  async list(
    workspaceId: string,
    limit: number,
    after?: SubscriptionRow,
  ): Promise<SubscriptionRow[]> {
    let query = this.db
      .selectFrom("webhook_subscriptions")
      .selectAll()
      .where("workspace_id", "=", workspaceId)
      .where("deleted_at", "is", null);
    if (after) {
      query = query.where((eb) =>
        eb.or([
          eb("created_at", ">", after.created_at),
          eb.and([eb("created_at", "=", after.created_at), eb("id", ">", after.id)]),
        ]),
      );
    }
    return query.orderBy("created_at").orderBy("id").limit(limit).execute();
  }

  /** Delete a subscription; its pending deliveries are canceled. */
  async delete(id: string): Promise<void> {
    const now = new Date();
    await this.db.transaction().execute(async (tx) => {
      await tx
        .updateTable("webhook_subscriptions")
        .set({ deleted_at: now })
        .where("id", "=", id)
        .where("deleted_at", "is", null)
        .execute();
      await tx
        .updateTable("webhook_deliveries")
        .set({ state: "canceled", lease_until: null })
        .where("subscription_id", "=", id)
        .where("state", "=", "pending")
        .execute();
    });
  }

  /** Every live subscription (the consumer matches events against them). */
  async active(): Promise<SubscriptionRow[]> {
    return this.db
      .selectFrom("webhook_subscriptions")
      .selectAll()
      .where("deleted_at", "is", null)
      .execute();
  }

  /** Queue deliveries; one already queued (same id) is left as it is. Returns how many were new. */
  async enqueue(deliveries: readonly NewDelivery[]): Promise<number> {
    if (deliveries.length === 0) return 0;
    const now = new Date();
    const result = await this.db
      .insertInto("webhook_deliveries")
      .values(
        deliveries.map((d) => ({
          id: deliveryIdOf(d.subscriptionId, d.eventId),
          subscription_id: d.subscriptionId,
          workspace_id: d.workspaceId,
          event_id: d.eventId,
          event_type: d.eventType,
          body: d.body,
          state: "pending" as const,
          attempts: 0,
          next_attempt_at: now,
          lease_until: null,
          last_status: null,
          last_error: null,
          created_at: now,
          delivered_at: null,
        })),
      )
      .onConflict((oc) => oc.column("id").doNothing())
      .executeTakeFirst();
    return Number(result.numInsertedOrUpdatedRows ?? 0n);
  }

  /**
   * Claim up to `limit` due deliveries for `leaseMs` (no other replica takes
   * them meanwhile), with their subscriptions.
   */
  async claimDue(
    limit: number,
    leaseMs: number,
  ): Promise<{ delivery: DeliveryRow; subscription: SubscriptionRow }[]> {
    const now = new Date();
    const claimed = await this.db
      .updateTable("webhook_deliveries")
      .set({ lease_until: new Date(now.getTime() + leaseMs) })
      .where("id", "in", (eb) =>
        eb
          .selectFrom("webhook_deliveries")
          .select("id")
          .where("state", "=", "pending")
          .where("next_attempt_at", "<=", now)
          .where((w) => w.or([w("lease_until", "is", null), w("lease_until", "<=", now)]))
          .orderBy("next_attempt_at")
          .limit(limit)
          .forUpdate()
          .skipLocked(),
      )
      .returningAll()
      .execute();
    if (claimed.length === 0) return [];
    const subscriptions = await this.db
      .selectFrom("webhook_subscriptions")
      .selectAll()
      .where("id", "in", [...new Set(claimed.map((d) => d.subscription_id))])
      .execute();
    const byId = new Map(subscriptions.map((s) => [s.id, s]));
    const out: { delivery: DeliveryRow; subscription: SubscriptionRow }[] = [];
    for (const delivery of claimed) {
      const subscription = byId.get(delivery.subscription_id);
      if (subscription === undefined || subscription.deleted_at !== null) {
        await this.finish(delivery.id, { state: "canceled" });
        continue;
      }
      let secret: string;
      try {
        secret = this.box.open(subscription.secret);
      } catch (error) {
        await this.finish(delivery.id, {
          state: "failed",
          status: null,
          error: error instanceof Error ? error.message : String(error),
          attempts: delivery.attempts,
        });
        continue;
      }
      out.push({ delivery, subscription: { ...subscription, secret } });
    }
    return out;
  }

  /** Record an attempt's result. */
  async finish(
    id: string,
    result:
      | { state: "delivered"; status: number; attempts: number }
      | {
          state: "pending";
          status: number | null;
          error: string;
          attempts: number;
          nextAttemptAt: Date;
        }
      | { state: "failed"; status: number | null; error: string; attempts: number }
      | { state: "canceled" },
  ): Promise<void> {
    const now = new Date();
    const set =
      result.state === "delivered"
        ? {
            state: result.state,
            attempts: result.attempts,
            last_status: result.status,
            last_error: null,
            delivered_at: now,
            lease_until: null,
          }
        : result.state === "pending"
          ? {
              state: result.state,
              attempts: result.attempts,
              last_status: result.status,
              last_error: result.error,
              next_attempt_at: result.nextAttemptAt,
              lease_until: null,
            }
          : result.state === "failed"
            ? {
                state: result.state,
                attempts: result.attempts,
                last_status: result.status,
                last_error: result.error,
                lease_until: null,
              }
            : { state: result.state, lease_until: null };
    await this.db
      .updateTable("webhook_deliveries")
      .set(set)
      .where("id", "=", id)
      .where("state", "=", "pending")
      .execute();
  }

  /** The latest deliveries of a subscription. */
  async deliveries(subscriptionId: string, limit: number): Promise<DeliveryRow[]> {
    return this.db
      .selectFrom("webhook_deliveries")
      .selectAll()
      .where("subscription_id", "=", subscriptionId)
      .orderBy("created_at", "desc")
      .orderBy("id")
      .limit(limit)
      .execute();
  }

  /** Delete finished deliveries older than `before`; returns how many. */
  async prune(before: Date): Promise<number> {
    const result = await this.db
      .deleteFrom("webhook_deliveries")
      .where("state", "in", ["delivered", "failed", "canceled"])
      .where("created_at", "<", before)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}
