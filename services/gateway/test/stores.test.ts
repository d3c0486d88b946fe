import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createDatabase, type Database, migrate } from "@trellis/storage";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createAuthenticator } from "../src/auth/authenticator.js";
import { adminKeyFile, bootstrapAdminKey } from "../src/auth/bootstrap.js";
import { PostgresIdempotencyStore, scopeHash } from "../src/store/idempotency-store.js";
import { hashApiKey, PostgresKeyStore } from "../src/store/key-store.js";
import { gatewayMigrations } from "../src/store/schema.js";

let db: Database<unknown>;

beforeAll(async () => {
  db = await createDatabase({ kind: "pglite" });
  await migrate(db, { schema: "gateway", migrations: gatewayMigrations });
});
afterAll(async () => {
  await db.close();
});

const scope = (key: string) => ({
  actorId: "admin",
  workspaceId: "default",
  method: "POST",
  target: "/v1/tasks",
  key,
});
const options = { leaseMs: 60_000, ttlMs: 24 * 3_600_000 };

describe("idempotency store", () => {
  it("claims once, replays the completed response, refuses another body", async () => {
    const store = new PostgresIdempotencyStore(db, "gateway");
    const first = await store.claim(scope("k1"), "hash-a", options);
    expect(first.kind).toBe("claimed");
    expect(await store.claim(scope("k1"), "hash-a", options)).toEqual({ kind: "in_flight" });
    expect(await store.claim(scope("k1"), "hash-b", options)).toEqual({ kind: "mismatch" });
    if (first.kind !== "claimed") throw new Error("unreachable");
    const response = {
      status: 202,
      body: '{"id":"task_1"}',
      headers: { "content-type": "application/json" },
    };
    expect(await store.complete(first.claim, response, options.ttlMs)).toBe(true);
    expect(await store.claim(scope("k1"), "hash-a", options)).toEqual({ kind: "replay", response });
    expect(await store.claim(scope("k1"), "hash-b", options)).toEqual({ kind: "mismatch" });
  });

  it("scopes keys by actor, workspace, method and target", async () => {
    const store = new PostgresIdempotencyStore(db, "gateway");
    const a = await store.claim(scope("k2"), "h", options);
    const b = await store.claim({ ...scope("k2"), actorId: "someone" }, "h", options);
    const c = await store.claim({ ...scope("k2"), target: "/v1/sessions" }, "h", options);
    expect([a.kind, b.kind, c.kind]).toEqual(["claimed", "claimed", "claimed"]);
    expect(scopeHash(scope("a|b"))).not.toBe(scopeHash({ ...scope("b"), target: "/v1/tasks|a" }));
  });

  it("lets exactly one of many concurrent claims win", async () => {
    const store = new PostgresIdempotencyStore(db, "gateway");
    const results = await Promise.all(
      Array.from({ length: 20 }, () => store.claim(scope("k3"), "h", options)),
    );
    expect(results.filter((r) => r.kind === "claimed")).toHaveLength(1);
    expect(results.filter((r) => r.kind === "in_flight")).toHaveLength(19);
  });

  it("frees a released key, takes over a dead owner's claim, prunes expired records", async () => {
    let now = Date.UTC(2026, 10, 23);
    const store = new PostgresIdempotencyStore(db, "gateway", () => new Date(now));
    const first = await store.claim(scope("k4"), "h", options);
    if (first.kind !== "claimed") throw new Error("expected a claim");
    await store.release(first.claim);
    const second = await store.claim(scope("k4"), "h", options);
    expect(second.kind).toBe("claimed");
    // The owner dies: after the lease, a retry takes over.
    now += options.leaseMs + 1;
    const third = await store.claim(scope("k4"), "h", options);
    expect(third.kind).toBe("claimed");
    if (second.kind !== "claimed" || third.kind !== "claimed") throw new Error("unreachable");
    // The old owner's late completion does not overwrite the new owner's.
    expect(
      await store.complete(second.claim, { status: 201, body: "old", headers: {} }, options.ttlMs),
    ).toBe(false);
    expect(
      await store.complete(third.claim, { status: 201, body: "new", headers: {} }, options.ttlMs),
    ).toBe(true);
    expect(await store.claim(scope("k4"), "h", options)).toMatchObject({
      kind: "replay",
      response: { body: "new" },
    });
    // Kept for the TTL, then forgotten.
    now += options.ttlMs - 1000;
    expect((await store.claim(scope("k4"), "h", options)).kind).toBe("replay");
    now += 2000;
    expect(await store.prune()).toBeGreaterThanOrEqual(1);
    expect((await store.claim(scope("k4"), "other", options)).kind).toBe("claimed");
  });
});

describe("key store and authentication", () => {
  it("stores only the hash and authenticates the key", async () => {
    const keys = new PostgresKeyStore(db, "gateway");
    const { key, record } = await keys.create({
      name: "ci",
      actorId: "robot",
      workspaceId: "ws_1",
      scopes: ["tasks:read", "tasks:write"],
    });
    expect(key).toMatch(/^trellis_sk_[A-Za-z0-9_-]{43}$/);
    const { rows } = await sql<{ key_hash: string; prefix: string }>`
      select key_hash, prefix from gateway.api_keys where id = ${record.id}`.execute(db.kysely);
    expect(rows[0]?.key_hash).toBe(hashApiKey(key));
    expect(JSON.stringify(rows)).not.toContain(key.slice(15));
    expect(await keys.authenticate(key)).toMatchObject({
      id: record.id,
      actorId: "robot",
      scopes: ["tasks:read", "tasks:write"],
    });
    expect(await keys.authenticate(`${key}x`)).toBeUndefined();
    expect(await keys.revoke(record.id)).toBe(true);
    expect(await keys.authenticate(key)).toBeUndefined();
    expect(await keys.list({ workspaceId: "ws_1" })).toEqual([]);
    expect(await keys.list({ workspaceId: "ws_1", includeRevoked: true })).toHaveLength(1);
  });

  it("parses bearer headers and never caches a key: a revoked key fails at once", async () => {
    const keys = new PostgresKeyStore(db, "gateway");
    const { key } = await keys.create({ name: "c", actorId: "a", workspaceId: "w", scopes: ["*"] });
    const auth = createAuthenticator({ keys });
    expect(await auth.authenticate(undefined)).toEqual({ ok: false, failure: "missing" });
    expect(await auth.authenticate("Basic abc")).toEqual({ ok: false, failure: "malformed" });
    expect(await auth.authenticate("Bearer nope-nope-nope")).toEqual({
      ok: false,
      failure: "invalid",
    });
    const ok = await auth.authenticate(`Bearer ${key}`);
    expect(ok).toMatchObject({
      ok: true,
      caller: { actorId: "a", workspaceId: "w", scopes: ["*"] },
      credential: { kind: "api_key" },
    });
    const [record] = await keys.list({ workspaceId: "w" });
    await keys.revoke(record!.id);
    expect(await auth.authenticate(`bearer ${key}`)).toEqual({ ok: false, failure: "invalid" });
  });
});

describe("admin key bootstrap", () => {
  it("generates once, prints once, writes a 0600 file, keeps it on restart", async () => {
    const local = await createDatabase({ kind: "pglite" });
    await migrate(local, { schema: "gateway", migrations: gatewayMigrations });
    const dir = await mkdtemp(join(tmpdir(), "gateway-key-"));
    try {
      const keys = new PostgresKeyStore(local, "gateway");
      const printed: string[] = [];
      const print = (text: string) => printed.push(text);
      /** The start-up step of the admin key: generated into `dir`, or `configuredKey`. */
      const bootstrap = (configuredKey: string | undefined) =>
        bootstrapAdminKey({
          db: local,
          keys,
          workspaceId: "default",
          configuredKey,
          ...(configuredKey === undefined ? { dataDir: dir } : {}),
          print,
        });
      const first = await bootstrap(undefined);
      expect(first.action).toBe("generated");
      const fromFile = (await readFile(join(dir, adminKeyFile), "utf8")).trim();
      expect((await stat(join(dir, adminKeyFile))).mode & 0o777).toBe(0o600);
      expect(printed.join("")).toContain(fromFile);
      expect(await keys.authenticate(fromFile)).toMatchObject({
        name: "admin",
        scopes: ["*"],
        workspaceId: "default",
      });

      const again = await bootstrap(undefined);
      expect(again).toEqual({ action: "kept", keyId: first.keyId });
      expect(printed).toHaveLength(1);

      // TRELLIS_API_KEY replaces the generated key.
      const configured = await bootstrap("my-admin-key-123");
      expect(configured.action).toBe("configured");
      expect(await keys.authenticate(fromFile)).toBeUndefined();
      expect(await keys.authenticate("my-admin-key-123")).toMatchObject({ name: "admin" });
      const same = await bootstrap("my-admin-key-123");
      expect(same).toEqual({ action: "configured", keyId: configured.keyId });
      expect(printed).toHaveLength(1);
    } finally {
      await local.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
