// OAuth2 client credentials end to end against an embedded Trellis: clients
// registered over REST, the token endpoint (RFC 6749 §4.4, both client
// authentication methods, its errors), the gateway's JWKS, tokens on REST and
// gRPC with their scopes, revocation, an external issuer validated through a
// JWKS URL served locally, and the signing key surviving a restart.
import { generateKeyPairSync } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { SessionService } from "@trellis/contracts/tasks";
import { harnClient, requestToken, TestIdentityProvider } from "@trellis/gateway/testing";
import { type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { createLogger } from "@trellis/runtime";
import { createDatabase, migrate } from "@trellis/storage";
import { createLocalJWKSet, decodeProtectedHeader, type JWK, jwtVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadSigningKeys, parsePrivateKey } from "../src/auth/signing-keys.js";
import { gatewayService } from "../src/definition.js";
import { gatewayMigrations } from "../src/store/schema.js";
import { startGatewayWithTasks } from "./support/embedded.js";

const ADMIN_KEY = "trellis-oauth-test-admin-key-0123456789";
const quiet = createLogger({ service: "test", level: "error" });

describe("OAuth2 client credentials", () => {
  let trellis: EmbeddedTrellis;
  let idp: TestIdentityProvider;
  let base: string;
  let admin: ReturnType<typeof harnClient>;
  let client: { id: string; secret: string };
  let sessionId: string;

  beforeAll(async () => {
    idp = await TestIdentityProvider.start();
    trellis = await startGatewayWithTasks(ADMIN_KEY, {
      TRELLIS_OAUTH_ISSUER: "https://trellis.example.test",
      TRELLIS_OAUTH_EXTERNAL_ISSUER: idp.issuer,
      TRELLIS_OAUTH_EXTERNAL_JWKS_URL: idp.jwksUrl,
    });
    base = trellis.address.url;
    admin = harnClient(base, ADMIN_KEY);
    const registered = await admin.post("/v1/oauth-clients", {
      name: "ci pipeline",
      scopes: ["sessions:read", "sessions:write"],
    });
    expect(registered.status).toBe(201);
    client = { id: registered.json.client_id, secret: registered.json.client_secret };
    const session = await admin.post("/v1/sessions", { workspace_id: "default" });
    sessionId = session.json.id;
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
    await idp?.close();
  });

  it("registers a client: the secret is shown once and stored hashed", async () => {
    expect(client.id).toMatch(/^cli_/);
    expect(client.secret).toMatch(/^trellis_cs_[A-Za-z0-9_-]{43}$/);
    const listed = await admin.get("/v1/oauth-clients");
    expect(listed.status).toBe(200);
    const entry = listed.json.data.find((c: { id: string }) => c.id === client.id);
    expect(entry).toMatchObject({
      object: "oauth_client",
      workspace_id: "default",
      scopes: ["sessions:read", "sessions:write"],
      revoked_at: null,
    });
    expect(listed.text).not.toContain(client.secret);
    expect((await admin.get(`/v1/oauth-clients/${client.id}`)).text).not.toContain(client.secret);
    const gateway = trellis.contexts.get("gateway")!;
    const rows = await gateway.db.kysely
      .withSchema("gateway")
      .selectFrom("oauth_clients" as never)
      .selectAll()
      .execute();
    expect(JSON.stringify(rows)).not.toContain(client.secret);
    expect(JSON.stringify(rows)).toContain("sha256:");
  });

  it("refuses to register a client with unknown scopes or scopes the caller lacks", async () => {
    const unknown = await admin.post("/v1/oauth-clients", { name: "x", scopes: ["tasks:fly"] });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error).toMatchObject({ code: "invalid_request", param: "scopes" });
    const wildcard = await admin.post("/v1/oauth-clients", { name: "x", scopes: ["*"] });
    expect(wildcard.status).toBe(400);
    const keys = await admin.post("/v1/api-keys", { name: "manager", scopes: ["keys:admin"] });
    const manager = harnClient(base, keys.json.key);
    const escalation = await manager.post("/v1/oauth-clients", {
      name: "x",
      scopes: ["tasks:write"],
    });
    expect(escalation.status).toBe(403);
    expect(escalation.json.error.code).toBe("permission_denied");
  });

  it("issues a signed, short-lived token with client_secret_basic", async () => {
    const response = await requestToken(base, {
      basic: client,
      form: { grant_type: "client_credentials" },
    });
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("no-store");
    expect(response.json).toMatchObject({
      token_type: "Bearer",
      expires_in: 900,
      scope: "sessions:read sessions:write",
    });
    const token: string = response.json.access_token;
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: "EdDSA", typ: "at+jwt" });
    // Verifiable by anyone with the gateway's published keys.
    const jwks = (await fetch(`${base}/.well-known/jwks.json`).then((r) => r.json())) as {
      keys: JWK[];
    };
    expect(jwks.keys[0]).toMatchObject({ kty: "OKP", crv: "Ed25519", use: "sig", alg: "EdDSA" });
    expect(jwks.keys[0]?.d).toBeUndefined();
    const { payload } = await jwtVerify(token, createLocalJWKSet(jwks), {
      issuer: "https://trellis.example.test",
      audience: "trellis",
    });
    expect(payload).toMatchObject({
      sub: client.id,
      client_id: client.id,
      workspace: "default",
      scope: "sessions:read sessions:write",
    });
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(900);
    const api = harnClient(base, token);
    expect((await api.get(`/v1/sessions/${sessionId}`)).status).toBe(200);
  });

  it("issues a token with client_secret_post, narrowed to the scope asked for", async () => {
    const response = await requestToken(base, {
      form: {
        grant_type: "client_credentials",
        client_id: client.id,
        client_secret: client.secret,
        scope: "sessions:read",
      },
    });
    expect(response.status).toBe(200);
    expect(response.json.scope).toBe("sessions:read");
    const api = harnClient(base, response.json.access_token);
    expect((await api.get(`/v1/sessions/${sessionId}`)).status).toBe(200);
    const write = await api.post("/v1/sessions", { workspace_id: "default" });
    expect(write.status).toBe(403);
    expect(write.json.error).toMatchObject({
      code: "permission_denied",
      details: { required_scope: "sessions:write" },
    });
    expect(write.headers.get("www-authenticate")).toContain('error="insufficient_scope"');
    // Not a scope the client has: tasks are out of reach whatever it asks.
    expect((await api.get("/v1/tasks")).status).toBe(403);
  });

  it("answers token requests it cannot serve with RFC 6749 errors", async () => {
    const wrongSecret = await requestToken(base, {
      basic: { id: client.id, secret: `${client.secret}x` },
      form: { grant_type: "client_credentials" },
    });
    expect(wrongSecret.status).toBe(401);
    expect(wrongSecret.json.error).toBe("invalid_client");
    expect(wrongSecret.headers.get("www-authenticate")).toContain("Basic");
    expect(JSON.stringify(wrongSecret.json)).not.toContain(client.secret);

    const unknown = await requestToken(base, {
      form: { grant_type: "client_credentials", client_id: "cli_nobody", client_secret: "nope" },
    });
    expect(unknown.status).toBe(401);
    expect(unknown.json.error).toBe("invalid_client");

    const noAuth = await requestToken(base, { form: { grant_type: "client_credentials" } });
    expect(noAuth.status).toBe(401);
    expect(noAuth.json.error).toBe("invalid_client");

    const grant = await requestToken(base, {
      basic: client,
      form: { grant_type: "password", username: "u", password: "p" },
    });
    expect(grant.status).toBe(400);
    expect(grant.json.error).toBe("unsupported_grant_type");

    const noGrant = await requestToken(base, { basic: client, form: {} });
    expect(noGrant.status).toBe(400);
    expect(noGrant.json.error).toBe("invalid_request");

    const scope = await requestToken(base, {
      basic: client,
      form: { grant_type: "client_credentials", scope: "sessions:read tasks:write" },
    });
    expect(scope.status).toBe(400);
    expect(scope.json.error).toBe("invalid_scope");

    const both = await requestToken(base, {
      basic: client,
      form: { grant_type: "client_credentials", client_secret: client.secret },
    });
    expect(both.status).toBe(400);
    expect(both.json.error).toBe("invalid_request");

    const json = await requestToken(base, {
      basic: client,
      contentType: "application/json",
      form: { grant_type: "client_credentials" },
    });
    expect(json.status).toBe(400);
    expect(json.json.error).toBe("invalid_request");

    const repeated = await fetch(`${base}/oauth/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: "grant_type=client_credentials&grant_type=client_credentials",
    });
    expect(repeated.status).toBe(400);

    const get = await requestToken(base, { method: "GET", form: {} });
    expect(get.status).toBe(405);
    expect(get.json.error).toBe("invalid_request");
  });

  it("authenticates gRPC calls and streams with the token, scopes enforced", async () => {
    const response = await requestToken(base, {
      basic: client,
      form: { grant_type: "client_credentials", scope: "sessions:read" },
    });
    const auth = { headers: { authorization: `Bearer ${response.json.access_token}` } };
    const sessions = createClient(SessionService, createGrpcTransport({ baseUrl: base }));
    const { session } = await sessions.getSession({ sessionId }, auth);
    expect(session?.id).toBe(sessionId);
    await expect(sessions.createSession({ workspaceId: "default" }, auth)).rejects.toMatchObject({
      code: 7,
    });
  });

  it("refuses tampered tokens and tokens of unknown issuers", async () => {
    const { json } = await requestToken(base, {
      basic: client,
      form: { grant_type: "client_credentials" },
    });
    const token: string = json.access_token;
    const [h, p, s] = token.split(".") as [string, string, string];
    const flipped = `${h}.${p}.${s.slice(0, -2)}${s.endsWith("AA") ? "BB" : "AA"}`;
    const tampered = await harnClient(base, flipped).get(`/v1/sessions/${sessionId}`);
    expect(tampered.status).toBe(401);
    expect(tampered.json.error.code).toBe("unauthenticated");
    expect(tampered.text).not.toContain(s);
    const stranger = await idp.token(
      { sub: "x", aud: "trellis", workspace: "default", scope: "sessions:read" },
      { issuer: "https://somebody-else.example.test" },
    );
    expect((await harnClient(base, stranger).get(`/v1/sessions/${sessionId}`)).status).toBe(401);
  });

  it("validates tokens of the external issuer: issuer, audience, expiry, workspace, scopes", async () => {
    const claims = { sub: "svc-robot", aud: "trellis", workspace: "default" };
    const good = await idp.token({ ...claims, scope: "sessions:read" });
    const api = harnClient(base, good);
    const read = await api.get(`/v1/sessions/${sessionId}`);
    expect(read.status).toBe(200);
    // `scp` lists work too; only named scopes count, never `*`.
    const scp = await idp.token({ ...claims, scp: ["sessions:write", "*"] });
    expect((await harnClient(base, scp).post("/v1/sessions", {})).status).toBe(201);
    expect((await harnClient(base, scp).get(`/v1/sessions/${sessionId}`)).status).toBe(403);

    const wrongAudience = await idp.token({
      ...claims,
      aud: "someone-else",
      scope: "sessions:read",
    });
    expect((await harnClient(base, wrongAudience).get(`/v1/sessions/${sessionId}`)).status).toBe(
      401,
    );
    const expired = await idp.token({ ...claims, scope: "sessions:read" }, { expiresInSec: -600 });
    const late = await harnClient(base, expired).get(`/v1/sessions/${sessionId}`);
    expect(late.status).toBe(401);
    expect(late.json.error.message).toContain("expired");
    expect(late.headers.get("www-authenticate")).toContain('error="invalid_token"');
    const noWorkspace = await idp.token({ sub: "svc", aud: "trellis", scope: "sessions:read" });
    expect((await harnClient(base, noWorkspace).get(`/v1/sessions/${sessionId}`)).status).toBe(401);
    const otherWorkspace = await idp.token({
      ...claims,
      workspace: "w_other",
      scope: "sessions:read",
    });
    const hidden = await harnClient(base, otherWorkspace).get(`/v1/sessions/${sessionId}`);
    expect(hidden.status).toBe(404);
    expect(hidden.json.error.code).toBe("resource_not_found");
    expect(idp.fetches).toBeGreaterThan(0);
  });

  it("stops a revoked client's tokens at once", async () => {
    const registered = await admin.post("/v1/oauth-clients", {
      name: "short-lived",
      scopes: ["sessions:read"],
    });
    const mine = { id: registered.json.client_id, secret: registered.json.client_secret };
    const { json } = await requestToken(base, {
      basic: mine,
      form: { grant_type: "client_credentials" },
    });
    const api = harnClient(base, json.access_token);
    expect((await api.get(`/v1/sessions/${sessionId}`)).status).toBe(200);
    const revoked = await admin.post(`/v1/oauth-clients/${mine.id}/revoke`);
    expect(revoked.status).toBe(200);
    expect(revoked.json.revoked_at).not.toBeNull();
    expect((await api.get(`/v1/sessions/${sessionId}`)).status).toBe(401);
    const again = await requestToken(base, {
      basic: mine,
      form: { grant_type: "client_credentials" },
    });
    expect(again.json.error).toBe("invalid_client");
  });
});

describe("an external issuer whose keys cannot be fetched", () => {
  it("makes its tokens 503 service_unavailable (retry later), not 401 and never 500", async () => {
    const idp = await TestIdentityProvider.start();
    const deadJwks = idp.jwksUrl;
    const token = await idp.token({
      sub: "svc",
      aud: "trellis",
      workspace: "default",
      scope: "sessions:read",
    });
    await idp.close();
    const trellis = await startEmbedded({
      services: [gatewayService],
      port: 0,
      logger: quiet,
      env: {
        TRELLIS_API_KEY: ADMIN_KEY,
        TRELLIS_LOG_LEVEL: "error",
        TRELLIS_OAUTH_EXTERNAL_ISSUER: idp.issuer,
        TRELLIS_OAUTH_EXTERNAL_JWKS_URL: deadJwks,
      },
    });
    try {
      const response = await harnClient(trellis.address.url, token).get("/v1/oauth-clients");
      expect(response.status).toBe(503);
      expect(response.json.error.code).toBe("service_unavailable");
      expect(response.headers.get("retry-after")).toBe("5");
    } finally {
      await trellis.close({ graceMs: 200 });
    }
  });
});

describe("the gateway's signing keys", () => {
  it("are kept in the database in embedded mode: tokens survive a restart", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trellis-oauth-"));
    const env = { TRELLIS_API_KEY: ADMIN_KEY, TRELLIS_LOG_LEVEL: "error" };
    try {
      let trellis = await startEmbedded({
        services: [gatewayService],
        dataDir,
        port: 0,
        env,
        logger: quiet,
      });
      const admin = harnClient(trellis.address.url, ADMIN_KEY);
      const registered = await admin.post("/v1/oauth-clients", {
        name: "restart",
        scopes: ["keys:admin"],
      });
      const { json } = await requestToken(trellis.address.url, {
        basic: { id: registered.json.client_id, secret: registered.json.client_secret },
        form: { grant_type: "client_credentials" },
      });
      const kid = decodeProtectedHeader(json.access_token).kid;
      await trellis.close({ graceMs: 200 });
      trellis = await startEmbedded({
        services: [gatewayService],
        dataDir,
        port: 0,
        env,
        logger: quiet,
      });
      try {
        const api = harnClient(trellis.address.url, json.access_token);
        expect((await api.get("/v1/oauth-clients")).status).toBe(200);
        const jwks = (await fetch(`${trellis.address.url}/.well-known/jwks.json`).then((r) =>
          r.json(),
        )) as { keys: JWK[] };
        expect(jwks.keys.map((k) => k.kid)).toEqual([kid]);
      } finally {
        await trellis.close({ graceMs: 200 });
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  it("come from configuration in distributed mode (PEM or JWK, Ed25519 or P-256, with retired keys)", async () => {
    const db = await createDatabase({ kind: "pglite" });
    try {
      await migrate(db, { schema: "gateway", migrations: gatewayMigrations });
      const none = await loadSigningKeys({
        settings: {},
        mode: "distributed",
        db,
        schema: "gateway",
      });
      expect(none).toMatchObject({ current: undefined, publicKeys: [], source: "none" });

      const ed = generateKeyPairSync("ed25519").privateKey.export({ format: "pem", type: "pkcs8" });
      const ec = generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({
        format: "jwk",
      });
      const retired = await parsePrivateKey(JSON.stringify(ec), "test");
      const ring = await loadSigningKeys({
        settings: {
          TRELLIS_OAUTH_SIGNING_KEY: String(ed),
          TRELLIS_OAUTH_PREVIOUS_KEYS: JSON.stringify({ keys: [retired.publicJwk] }),
        },
        mode: "distributed",
        db,
        schema: "gateway",
      });
      expect(ring.source).toBe("config");
      expect(ring.current?.alg).toBe("EdDSA");
      expect(ring.publicKeys.map((k) => k.alg)).toEqual(["EdDSA", "ES256"]);
      expect(ring.publicKeys.every((k) => k.d === undefined)).toBe(true);
      expect(retired.alg).toBe("ES256");

      const rsa = generateKeyPairSync("rsa", { modulusLength: 2048 }).privateKey.export({
        format: "pem",
        type: "pkcs8",
      });
      await expect(
        loadSigningKeys({
          settings: { TRELLIS_OAUTH_SIGNING_KEY: String(rsa) },
          mode: "distributed",
          db,
          schema: "gateway",
        }),
      ).rejects.toMatchObject({ reason: "config_invalid", param: "TRELLIS_OAUTH_SIGNING_KEY" });
      await expect(
        loadSigningKeys({
          settings: { TRELLIS_OAUTH_SIGNING_KEY: "not a key" },
          mode: "distributed",
          db,
          schema: "gateway",
        }),
      ).rejects.toMatchObject({ reason: "config_invalid" });
    } finally {
      await db.close();
    }
  });
});
