// The API-key cache of the gateway, on PGlite and real PostgreSQL, with two
// "replicas" (two Databases, each with its own listener and cache):
// - a key seen once is served without a database read until its TTL;
// - revoking it through one replica empties the cache of the other (NOTIFY
//   in the revoking statement), so it fails there at its next request even
//   though its TTL is far from over;
// - a lookup in flight while a revocation is announced is not cached;
// - unknown and revoked keys are never cached.
import { createDatabase, type Database, migrate, openPGlite } from "@trellis/storage";
import { createTestDatabase, eventually, type TestDatabase } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuthenticator } from "../src/auth/authenticator.js";
import { ApiKeyCache } from "../src/auth/key-cache.js";
import { type ApiKeyRecord, type KeyStore, PostgresKeyStore } from "../src/store/key-store.js";
import { gatewayMigrations } from "../src/store/schema.js";

interface Replicas {
  a: Database<unknown>;
  b: Database<unknown>;
  close(): Promise<void>;
}

/** A key store that counts its lookups (database reads). */
function counting(keys: KeyStore): KeyStore & { reads: number } {
  const counted = Object.create(keys) as KeyStore & { reads: number };
  counted.reads = 0;
  counted.authenticate = (key: string) => {
    counted.reads++;
    return keys.authenticate(key);
  };
  return counted;
}

const backends: Record<string, () => Promise<Replicas>> = {
  pglite: async () => {
    const pglite = await openPGlite();
    const a = await createDatabase({ kind: "pglite", pglite });
    const b = await createDatabase({ kind: "pglite", pglite });
    return {
      a,
      b,
      async close() {
        await a.close();
        await b.close();
        await pglite.close();
      },
    };
  },
  postgres: async () => {
    const test: TestDatabase = await createTestDatabase("trellis_key_cache");
    const a = await createDatabase({ kind: "postgres", url: test.url });
    const b = await createDatabase({ kind: "postgres", url: test.url });
    return {
      a,
      b,
      async close() {
        await a.close();
        await b.close();
        await test.drop();
      },
    };
  },
};

for (const [backend, open] of Object.entries(backends)) {
  describe(`API-key cache (${backend})`, () => {
    let replicas: Replicas;
    beforeAll(async () => {
      replicas = await open();
      await migrate(replicas.a, { schema: "gateway", migrations: gatewayMigrations });
    }, 60_000);
    afterAll(async () => {
      await replicas?.close();
    });

    it("serves a key from the cache; a revocation on one replica empties the other's", async () => {
      // A TTL far longer than the test: only the revocation notice can end the entries.
      const ttlMs = 10 * 60_000;
      const cacheA = await ApiKeyCache.listen(replicas.a, { ttlMs });
      const cacheB = await ApiKeyCache.listen(replicas.b, { ttlMs });
      try {
        const keysA = new PostgresKeyStore(replicas.a, "gateway");
        const keysB = counting(new PostgresKeyStore(replicas.b, "gateway"));
        const onB = createAuthenticator({ keys: keysB, keyCache: cacheB });
        const { key, record } = await keysA.create({
          name: "cached",
          actorId: "robot",
          workspaceId: "ws_cache",
          scopes: ["sessions:read"],
        });
        const other = await keysA.create({
          name: "other",
          actorId: "robot",
          workspaceId: "ws_cache",
          scopes: ["*"],
        });

        const first = await onB.authenticate(`Bearer ${key}`);
        expect(first).toMatchObject({
          ok: true,
          credential: { kind: "api_key", keyId: record.id },
        });
        expect(await onB.authenticate(`Bearer ${key}`)).toEqual(first);
        expect(await onB.authenticate(`Bearer ${key}`)).toEqual(first);
        expect(keysB.reads).toBe(1);
        expect(await onB.authenticate(`Bearer ${other.key}`)).toMatchObject({ ok: true });
        expect(cacheB.size).toBe(2);

        // Unknown keys are never cached.
        expect(await onB.authenticate("Bearer unknown-key-0000")).toEqual({
          ok: false,
          failure: "invalid",
        });
        expect(await onB.authenticate("Bearer unknown-key-0000")).toMatchObject({ ok: false });
        expect(keysB.reads).toBe(4);

        // Revoked through replica A: B's cache is emptied by the notice, and
        // the key fails on B (the TTL has minutes left).
        expect(await keysA.revoke(record.id)).toBe(true);
        await eventually(() => cacheB.size === 0, {
          timeoutMs: 20_000,
          what: "the revocation notice on replica B",
        });
        expect(cacheA.size).toBe(0);
        expect(await onB.authenticate(`Bearer ${key}`)).toEqual({ ok: false, failure: "invalid" });
        // A revoked key is not cached as refused: still refused, read each time.
        const reads = keysB.reads;
        expect(await onB.authenticate(`Bearer ${key}`)).toEqual({ ok: false, failure: "invalid" });
        expect(keysB.reads).toBe(reads + 1);
        // The other key still works (looked up again, then cached again).
        expect(await onB.authenticate(`Bearer ${other.key}`)).toMatchObject({ ok: true });
        expect(await onB.authenticate(`Bearer ${other.key}`)).toMatchObject({ ok: true });
        expect(keysB.reads).toBe(reads + 2);
        // Revoking a key that is not active announces nothing.
        expect(await keysA.revoke(record.id)).toBe(false);
      } finally {
        await cacheA.close();
        await cacheB.close();
      }
    });
  });
}

describe("API-key cache lookups", () => {
  const record: ApiKeyRecord = {
    id: "key_1",
    name: "k",
    prefix: "trel",
    actorId: "a",
    workspaceId: "w",
    scopes: ["*"],
    createdAt: new Date(0),
    revokedAt: undefined,
  };

  it("does not cache a lookup that was in flight when a revocation was announced", async () => {
    const cache = new ApiKeyCache({ ttlMs: 60_000 });
    let release: (r: ApiKeyRecord | undefined) => void = () => {};
    let loads = 0;
    const slow = () => {
      loads++;
      return new Promise<ApiKeyRecord | undefined>((resolve) => {
        release = resolve;
      });
    };
    const pending = cache.lookup("some-key-1234", slow);
    cache.invalidate();
    release(record); // read before the revocation committed
    expect(await pending).toBe(record);
    expect(cache.size).toBe(0);
    const again = cache.lookup("some-key-1234", slow);
    release(undefined);
    expect(await again).toBeUndefined();
    expect(loads).toBe(2);
  });

  it("expires entries after the TTL and keeps at most maxEntries", async () => {
    let now = 1_000;
    const cache = new ApiKeyCache({ ttlMs: 5_000, maxEntries: 2, now: () => now });
    let loads = 0;
    const load = async () => {
      loads++;
      return record;
    };
    await cache.lookup("key-aaaaaaaa", load);
    await cache.lookup("key-aaaaaaaa", load);
    expect(loads).toBe(1);
    now += 5_000;
    await cache.lookup("key-aaaaaaaa", load);
    expect(loads).toBe(2);
    await cache.lookup("key-bbbbbbbb", load);
    await cache.lookup("key-cccccccc", load);
    expect(cache.size).toBe(2);
    await cache.lookup("key-aaaaaaaa", load); // the oldest went first
    expect(loads).toBe(5);
  });
});
