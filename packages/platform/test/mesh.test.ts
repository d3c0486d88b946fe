// Service credentials: what a token binds, and every way one is refused.
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { MeshCredentials, meshCredentialsFromEnv, meshHttpTarget } from "../src/index.js";

const secret = "0123456789abcdef0123456789abcdef-test";
const caller = { actorId: "alice", workspaceId: "ws_a", scopes: ["tasks:read", "tasks:write"] };
const target = "/trellis.tasks.v1.TaskService/GetTask";

describe("mesh credentials", () => {
  it("verify what they signed: peer, target, caller, expiry", () => {
    let now = 1_000_000;
    const mesh = new MeshCredentials(secret, { now: () => now });
    const token = mesh.sign("gateway", target, caller);
    expect(token).toMatch(/^v1\.gateway\.[0-9a-z]+\.[A-Za-z0-9_-]{43}$/);
    expect(mesh.verify(token, target, caller)).toEqual({ ok: true, peer: "gateway" });
    expect(mesh.verify(token, "/trellis.tasks.v1.TaskService/CancelTask", caller)).toEqual({
      ok: false,
      failure: "bad_signature",
    });
    expect(mesh.verify(token, target, { ...caller, workspaceId: "ws_b" }).ok).toBe(false);
    expect(mesh.verify(token, target, { ...caller, scopes: ["*"] }).ok).toBe(false);
    expect(mesh.verify(token, target, undefined).ok).toBe(false);
    // An internal call (no caller) is signed as such.
    const internal = mesh.sign("tasks", target, undefined);
    expect(mesh.verify(internal, target, undefined).ok).toBe(true);
    expect(mesh.verify(internal, target, caller).ok).toBe(false);
    now += 60_001;
    expect(mesh.verify(token, target, caller)).toEqual({ ok: false, failure: "expired" });
  });

  it("reuse a signed token for half its life; a checked token binds the same way on every call", () => {
    let now = 5_000_000;
    const mesh = new MeshCredentials(secret, { now: () => now });
    const first = mesh.sign("gateway", target, caller);
    now += 29_000;
    expect(mesh.sign("gateway", target, caller)).toBe(first);
    // Another method, caller or peer gets a token of its own.
    expect(mesh.sign("gateway", "/trellis.tasks.v1.TaskService/CancelTask", caller)).not.toBe(
      first,
    );
    expect(mesh.sign("gateway", target, { ...caller, actorId: "bob" })).not.toBe(first);
    expect(mesh.sign("chat", target, caller)).not.toBe(first);
    now += 1_001;
    const second = mesh.sign("gateway", target, caller);
    expect(second).not.toBe(first);
    // A reused token still has at least half its lifetime: valid 29 s later.
    now += 29_000;
    expect(mesh.verify(second, target, caller).ok).toBe(true);
    // Verified once (cached), still refused for another target or caller, and once expired.
    expect(mesh.verify(second, target, caller).ok).toBe(true);
    expect(mesh.verify(second, "/trellis.tasks.v1.TaskService/CancelTask", caller)).toEqual({
      ok: false,
      failure: "bad_signature",
    });
    expect(mesh.verify(second, target, { ...caller, scopes: ["*"] }).ok).toBe(false);
    const [v, peer, expires, mac] = second.split(".");
    const later = (Number.parseInt(expires as string, 36) + 1000).toString(36);
    expect(mesh.verify(`${v}.${peer}.${later}.${mac}`, target, caller).ok).toBe(false);
    now += 31_000;
    expect(mesh.verify(second, target, caller)).toEqual({ ok: false, failure: "expired" });
  });

  it("refuse other secrets, tampering, peers and shapes", () => {
    const mesh = new MeshCredentials(secret);
    const other = new MeshCredentials(`${secret}-other`);
    const token = mesh.sign("chat", target, caller);
    expect(other.verify(token, target, caller)).toEqual({ ok: false, failure: "bad_signature" });
    const [v, , expires, mac] = token.split(".");
    expect(mesh.verify(`${v}.gateway.${expires}.${mac}`, target, caller).ok).toBe(false);
    const later = (Number.parseInt(expires as string, 36) + 1000).toString(36);
    expect(mesh.verify(`${v}.chat.${later}.${mac}`, target, caller).ok).toBe(false);
    for (const bad of ["", "v1", "v2.chat.1.abc", `${token}.x`, "v1.Chat!.1.x"]) {
      expect(mesh.verify(bad, target, caller).ok).toBe(false);
    }
    expect(mesh.verify(undefined, target, caller)).toEqual({ ok: false, failure: "missing" });
    // Far-future expiries are not accepted either (a token lives 60 s).
    const future = new MeshCredentials(secret, { now: () => Date.now() + 3_600_000 });
    expect(mesh.verify(future.sign("chat", target, caller), target, caller)).toEqual({
      ok: false,
      failure: "expired",
    });
    expect(() => mesh.sign("Not A Peer", target, caller)).toThrow();
  });

  it("cover plain HTTP requests by method and path", () => {
    const mesh = new MeshCredentials(secret);
    const token = mesh.sign("gateway", meshHttpTarget("get", "/v1/receipts/r1"), caller);
    expect(mesh.verify(token, meshHttpTarget("GET", "/v1/receipts/r1"), caller).ok).toBe(true);
    expect(mesh.verify(token, meshHttpTarget("GET", "/v1/receipts/r2"), caller).ok).toBe(false);
    expect(mesh.verify(token, meshHttpTarget("POST", "/v1/receipts/r1"), caller).ok).toBe(false);
  });

  it("come from TRELLIS_MESH_SECRET or a file, and refuse short or doubled configuration", async () => {
    expect(meshCredentialsFromEnv({})).toBeUndefined();
    const fromEnv = meshCredentialsFromEnv({ TRELLIS_MESH_SECRET: secret });
    const token = new MeshCredentials(secret).sign("tasks", target, undefined);
    expect(fromEnv?.verify(token, target, undefined).ok).toBe(true);
    const dir = await mkdtemp(join(tmpdir(), "mesh-"));
    try {
      const file = join(dir, "secret");
      await writeFile(file, `${secret}\n`);
      const fromFile = meshCredentialsFromEnv({ TRELLIS_MESH_SECRET_FILE: file });
      expect(fromFile?.verify(token, target, undefined).ok).toBe(true);
      expect(() =>
        meshCredentialsFromEnv({ TRELLIS_MESH_SECRET_FILE: join(dir, "missing") }),
      ).toThrow(/cannot read/);
      expect(() =>
        meshCredentialsFromEnv({ TRELLIS_MESH_SECRET: secret, TRELLIS_MESH_SECRET_FILE: file }),
      ).toThrow(/not both/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    expect(() => meshCredentialsFromEnv({ TRELLIS_MESH_SECRET: "short" })).toThrow(
      /at least 32 characters/,
    );
  });
});
