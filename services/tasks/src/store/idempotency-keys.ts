/**
 * Idempotency keys of the tasks service's stores (the task store's write
 * unit, branches, connectors), in one `idempotency_keys` table: the first
 * request with a key reserves it for the resource it creates; a retry gets
 * that resource's id back; the key with another request body is
 * `idempotency_key_reused`.
 * Concurrent requests with one key wait for each other on the key's row.
 */
import type { Transaction } from "kysely";
import { idempotencyKeyReused } from "../domain/errors.js";
import type { Idempotency } from "./task-store.js";

interface KeyTables {
  idempotency_keys: {
    scope: string;
    key: string;
    request_hash: string;
    resource_id: string;
  };
}

/**
 * Reserves `idempotency` for `resourceId` within `scope` (workspace, actor,
 * method, target). Returns the id an earlier request created, or undefined
 * when the key is new (or absent).
 */
export async function reserveKey<DB extends KeyTables>(
  trx: Transaction<DB>,
  scope: string,
  idempotency: Idempotency | undefined,
  resourceId: string,
): Promise<string | undefined> {
  if (!idempotency || idempotency.key === "") return undefined;
  const db = trx as unknown as Transaction<KeyTables>;
  const inserted = await db
    .insertInto("idempotency_keys")
    .values({
      scope,
      key: idempotency.key,
      request_hash: idempotency.requestHash,
      resource_id: resourceId,
    })
    .onConflict((oc) => oc.columns(["scope", "key"]).doNothing())
    .returning("resource_id")
    .executeTakeFirst();
  if (inserted) return undefined;
  const existing = await db
    .selectFrom("idempotency_keys")
    .select(["request_hash", "resource_id"])
    .where("scope", "=", scope)
    .where("key", "=", idempotency.key)
    .executeTakeFirstOrThrow();
  if (existing.request_hash !== idempotency.requestHash)
    throw idempotencyKeyReused(idempotency.key);
  return existing.resource_id;
}
