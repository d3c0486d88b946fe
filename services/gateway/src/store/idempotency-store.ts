/**
 * Idempotency records (Harn v1 "Idempotency"): the scope is actor +
 * workspace + method + canonical target + Idempotency-Key; the first completed
 * response is kept at least 24 hours and replayed for retries with an
 * equivalent body; a different body is refused.
 *
 * No duplicate is ever created by concurrent retries: a request first
 * *claims* the scope with one `insert … on conflict do nothing` (the primary
 * key decides the single winner), and only the winner executes. Others see the
 * claim `in_flight` until the winner stores its response (`completed`) or
 * gives the claim up (`release`, e.g. on a 5xx so that a retry may run
 * again). A claim whose owner died is taken over once its lease runs out.
 */
import { randomBytes } from "node:crypto";
import type { Database } from "@trellis/storage";
import type { Kysely } from "kysely";
import { sha256Hex } from "../domain/canonical-json.js";
import type { GatewayDatabase, IdempotencyKeyRow } from "./schema.js";

/** Who asked for what, under which key. */
export interface IdempotencyScope {
  actorId: string;
  workspaceId: string;
  /** HTTP method (or RPC name). */
  method: string;
  /** Canonical target, e.g. `/v1/sessions/ses_1/tasks`. */
  target: string;
  /** The client's Idempotency-Key. */
  key: string;
}

/** A response kept for replay. */
export interface StoredResponse {
  status: number;
  body: string;
  headers: Record<string, string>;
}

/** A claim held by the request that won it. */
export interface IdempotencyClaim {
  scopeHash: string;
  owner: string;
}

/** What {@link IdempotencyStore.claim} found. */
export type ClaimResult =
  /** This request owns the scope: execute, then `complete` or `release`. */
  | { kind: "claimed"; claim: IdempotencyClaim }
  /** An earlier request with the same body completed: send its response again. */
  | { kind: "replay"; response: StoredResponse }
  /** The key was used with a different body. */
  | { kind: "mismatch" }
  /** An earlier request with the same body is still running. */
  | { kind: "in_flight" };

/** Timing of claims. */
export interface ClaimOptions {
  /** How long a claim protects a running request before another may take over. */
  leaseMs: number;
  /** How long a completed response is kept. */
  ttlMs: number;
}

/** The port. */
export interface IdempotencyStore {
  claim(scope: IdempotencyScope, requestHash: string, options: ClaimOptions): Promise<ClaimResult>;
  /** Store the response of a claim; false when the claim had been taken over. */
  complete(claim: IdempotencyClaim, response: StoredResponse, ttlMs: number): Promise<boolean>;
  /** Give a claim up without a response (the next retry executes again). */
  release(claim: IdempotencyClaim): Promise<void>;
  /** Forget expired records; returns how many. */
  prune(now?: Date): Promise<number>;
}

/**
 * The hash that identifies a scope. Parts are length-prefixed so that no two
 * different scopes concatenate to the same text.
 */
export function scopeHash(scope: IdempotencyScope): string {
  const parts = [scope.actorId, scope.workspaceId, scope.method, scope.target, scope.key];
  return sha256Hex(parts.map((p) => `${p.length}:${p}`).join("|"));
}

/** {@link IdempotencyStore} on PostgreSQL or PGlite (table `<schema>.idempotency_keys`). */
export class PostgresIdempotencyStore implements IdempotencyStore {
  private readonly db: Kysely<GatewayDatabase>;

  constructor(
    database: Database<unknown>,
    schema: string,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.db = (database.kysely as unknown as Kysely<GatewayDatabase>).withSchema(schema);
  }

  async claim(
    scope: IdempotencyScope,
    requestHash: string,
    options: ClaimOptions,
  ): Promise<ClaimResult> {
    const hash = scopeHash(scope);
    // A few rounds: each ends in a decision unless a concurrent writer changed
    // the row between our statements (then look again).
    for (let round = 0; round < 5; round++) {
      const now = this.clock();
      const owner = randomBytes(12).toString("hex");
      const inserted = await this.db
        .insertInto("idempotency_keys")
        .values({
          scope_hash: hash,
          actor_id: scope.actorId,
          workspace_id: scope.workspaceId,
          method: scope.method,
          target: scope.target,
          idempotency_key: scope.key,
          request_hash: requestHash,
          state: "in_flight",
          owner,
          lease_until: new Date(now.getTime() + options.leaseMs),
          response_status: null,
          response_body: null,
          response_headers: null,
          created_at: now,
          completed_at: null,
          expires_at: new Date(now.getTime() + Math.max(options.ttlMs, options.leaseMs)),
        })
        .onConflict((oc) => oc.column("scope_hash").doNothing())
        .returning("scope_hash")
        .executeTakeFirst();
      if (inserted) return { kind: "claimed", claim: { scopeHash: hash, owner } };

      const row = await this.db
        .selectFrom("idempotency_keys")
        .selectAll()
        .where("scope_hash", "=", hash)
        .executeTakeFirst();
      if (row === undefined) continue;
      // Past its retention (and not running): the key is free again.
      if (row.expires_at.getTime() <= now.getTime() && row.lease_until.getTime() <= now.getTime()) {
        await this.db
          .deleteFrom("idempotency_keys")
          .where("scope_hash", "=", hash)
          .where("owner", "=", row.owner)
          .execute();
        continue;
      }
      if (row.request_hash !== requestHash) return { kind: "mismatch" };
      if (row.state === "completed") return { kind: "replay", response: storedResponse(row) };
      if (row.lease_until.getTime() > now.getTime()) return { kind: "in_flight" };
      // The owner stopped renewing (crashed): take the claim over.
      const taken = await this.db
        .updateTable("idempotency_keys")
        .set({ owner, lease_until: new Date(now.getTime() + options.leaseMs) })
        .where("scope_hash", "=", hash)
        .where("state", "=", "in_flight")
        .where("owner", "=", row.owner)
        .returning("scope_hash")
        .executeTakeFirst();
      if (taken) return { kind: "claimed", claim: { scopeHash: hash, owner } };
    }
    return { kind: "in_flight" };
  }

  async complete(
    claim: IdempotencyClaim,
    response: StoredResponse,
    ttlMs: number,
  ): Promise<boolean> {
    const now = this.clock();
    const result = await this.db
      .updateTable("idempotency_keys")
      .set({
        state: "completed",
        response_status: response.status,
        response_body: response.body,
        response_headers: JSON.stringify(response.headers),
        completed_at: now,
        expires_at: new Date(now.getTime() + ttlMs),
      })
      .where("scope_hash", "=", claim.scopeHash)
      .where("owner", "=", claim.owner)
      .where("state", "=", "in_flight")
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async release(claim: IdempotencyClaim): Promise<void> {
    await this.db
      .deleteFrom("idempotency_keys")
      .where("scope_hash", "=", claim.scopeHash)
      .where("owner", "=", claim.owner)
      .where("state", "=", "in_flight")
      .execute();
  }

  async prune(now: Date = this.clock()): Promise<number> {
    const result = await this.db
      .deleteFrom("idempotency_keys")
      .where("expires_at", "<=", now)
      .where("lease_until", "<=", now)
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  }
}

function storedResponse(row: IdempotencyKeyRow): StoredResponse {
  let headers: Record<string, string> = {};
  try {
    headers = row.response_headers
      ? (JSON.parse(row.response_headers) as Record<string, string>)
      : {};
  } catch {
    headers = {};
  }
  return { status: row.response_status ?? 200, body: row.response_body ?? "", headers };
}
