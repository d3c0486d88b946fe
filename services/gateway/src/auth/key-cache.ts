/**
 * A per-replica cache of API-key lookups that stays revocation-correct across
 * gateway replicas.
 *
 * - Only active keys are cached (an unknown or revoked key is looked up every
 *   time), by the key's hash (the plaintext is never kept), for a short TTL.
 * - Revoking a key sends `NOTIFY` {@link apiKeyRevokedChannel} in the
 *   revoking transaction (see `PostgresKeyStore.revoke`, which the REST
 *   route, the bootstrap and the `trellis keys` CLI all use). Every replica
 *   listens and drops its whole cache on the notification, so a revoked key
 *   fails everywhere as soon as the notice arrives (it leaves PostgreSQL at
 *   the revoking commit, so a request racing it on another replica may still
 *   pass); revocations are rare, so dropping everything is cheaper than
 *   tracking which key went.
 * - A lookup that was in flight when a notification arrived is not cached
 *   (it may have read the row before the revocation committed).
 * - A listener that lost its connection is called again once it is back
 *   (see `Database.listen`), which drops the cache too; while it is down, the
 *   TTL bounds how long a revoked key may still pass on this replica.
 */
import type { Database, Unlisten } from "@trellis/storage";
import { type ApiKeyRecord, apiKeyRevokedChannel, hashApiKey } from "../store/key-store.js";

/** Options of {@link ApiKeyCache}. */
export interface ApiKeyCacheOptions {
  /** How long a looked-up key is trusted without asking the database (default 5 s). */
  ttlMs?: number;
  /** Most keys kept (default 10,000; the oldest go first). */
  maxEntries?: number;
  /** Clock (tests). */
  now?: () => number;
}

interface Entry {
  record: ApiKeyRecord;
  expiresAt: number;
}

/**
 * Cached positive key lookups. Create one per gateway with
 * {@link ApiKeyCache.listen} (subscribed to revocations), and `close()` it
 * when the gateway stops.
 */
export class ApiKeyCache {
  private readonly entries = new Map<string, Entry>();
  /** Bumped by every revocation notice; a lookup that saw it change is not cached. */
  private generation = 0;
  private unlisten: Unlisten | undefined;
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;

  constructor(options: ApiKeyCacheOptions = {}) {
    this.ttlMs = options.ttlMs ?? 5_000;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /** A cache subscribed to the revocations committed in `database`. */
  static async listen(
    database: Database<unknown>,
    options: ApiKeyCacheOptions = {},
  ): Promise<ApiKeyCache> {
    const cache = new ApiKeyCache(options);
    cache.unlisten = await database.listen(apiKeyRevokedChannel, () => cache.invalidate());
    return cache;
  }

  /** Forget every key (a key was revoked somewhere, or notices may have been missed). */
  invalidate(): void {
    this.generation++;
    this.entries.clear();
  }

  /** How many keys are cached. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * The active key record of `key`: from the cache while fresh, else from
   * `load` (cached when found and no revocation was announced meanwhile).
   */
  async lookup(
    key: string,
    load: (key: string) => Promise<ApiKeyRecord | undefined>,
  ): Promise<ApiKeyRecord | undefined> {
    const hash = hashApiKey(key);
    const now = this.now();
    const hit = this.entries.get(hash);
    if (hit !== undefined) {
      if (hit.expiresAt > now) return hit.record;
      this.entries.delete(hash);
    }
    const generation = this.generation;
    const record = await load(key);
    if (record !== undefined && generation === this.generation) {
      if (this.entries.size >= this.maxEntries) {
        const oldest = this.entries.keys().next();
        if (!oldest.done) this.entries.delete(oldest.value);
      }
      this.entries.set(hash, { record, expiresAt: now + this.ttlMs });
    }
    return record;
  }

  /** Stop listening and forget everything. */
  async close(): Promise<void> {
    const unlisten = this.unlisten;
    this.unlisten = undefined;
    this.invalidate();
    if (unlisten !== undefined) await unlisten();
  }
}
