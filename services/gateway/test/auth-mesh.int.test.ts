// Distributed mode on real PostgreSQL and JetStream, every service its own
// server with one shared service credential secret:
// - internal services refuse calls that did not come through the gateway or
//   another mesh service (spoofed caller headers, forged or replayed
//   credentials included); health and reflection stay open;
// - a key revoked through one gateway replica stops working on the other as
//   soon as the revocation's NOTIFY reaches it, well before the key cache's
//   5 s TTL would (the NOTIFY empties every replica's cache);
// - OAuth2 tokens signed with the configured key work on every replica; a
//   gateway without a key issues none.
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { createClient, type Interceptor } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { health, reflectionV1 } from "@trellis/contracts/grpc";
import { SessionService } from "@trellis/contracts/tasks";
import { harnClient, poll, requestToken } from "@trellis/gateway/testing";
import {
  callerHeaders,
  createMeshClientInterceptor,
  MeshCredentials,
  meshHeader,
  meshHttpTarget,
  type RunningService,
  runService,
} from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { errorDetailOf } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { openDeployment, type TestDeployment } from "./support/deployment.js";

const ADMIN_KEY = "trellis-mesh-test-admin-key-0123456789";
const SECRET = randomBytes(32).toString("base64url");

describe("service credentials and shared auth state (distributed)", () => {
  let deployment: TestDeployment;
  let tasks: RunningService;
  let receipts: RunningService;
  let gatewayA: RunningService;
  let gatewayB: RunningService;
  let gatewayC: RunningService;
  const signingKey = String(
    generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({
      format: "pem",
      type: "pkcs8",
    }),
  );

  beforeAll(async () => {
    deployment = await openDeployment("trellis_gw_auth", { prefix: "gwauth", meshSecret: SECRET });
    tasks = await deployment.start(tasksService);
    receipts = await deployment.start(receiptsService, { TRELLIS_TASKS_URL: tasks.address.url });
    const gatewayEnv = {
      TRELLIS_API_KEY: ADMIN_KEY,
      TRELLIS_TASKS_URL: tasks.address.url,
      TRELLIS_RECEIPTS_URL: receipts.address.url,
      TRELLIS_OAUTH_ISSUER: "https://gateway.example.test",
    };
    gatewayA = await deployment.start(gatewayService, {
      ...gatewayEnv,
      TRELLIS_OAUTH_SIGNING_KEY: signingKey,
    });
    gatewayB = await deployment.start(gatewayService, {
      ...gatewayEnv,
      TRELLIS_OAUTH_SIGNING_KEY: signingKey,
    });
    gatewayC = await deployment.start(gatewayService, gatewayEnv);
  }, 90_000);

  afterAll(async () => {
    await deployment?.close();
  });

  function sessionsAt(url: string, interceptors: Interceptor[] = []) {
    return createClient(SessionService, createGrpcTransport({ baseUrl: url, interceptors }));
  }

  it("refuses direct calls to an internal service without a service credential", async () => {
    const direct = sessionsAt(tasks.address.url);
    const failure = await direct.listSessions({ workspaceId: "default" }).catch((e) => e);
    expect(failure.code).toBe(16);
    expect(errorDetailOf(failure)).toMatchObject({
      reason: "unauthenticated",
      domain: "mesh",
      metadata: { problem: "missing" },
    });
    // Caller headers from outside count for nothing.
    const spoofed = await direct
      .listSessions(
        { workspaceId: "default" },
        {
          headers: {
            [callerHeaders.actor]: "admin",
            [callerHeaders.workspace]: "default",
            [callerHeaders.scopes]: "*",
          },
        },
      )
      .catch((e) => e);
    expect(spoofed.code).toBe(16);
    // Probes and schema discovery need nothing.
    const probe = await createClient(
      health.Health,
      createGrpcTransport({ baseUrl: tasks.address.url }),
    ).check({ service: "" });
    expect(probe.status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    const reflection = createClient(
      reflectionV1.ServerReflection,
      createGrpcTransport({ baseUrl: tasks.address.url }),
    );
    for await (const answer of reflection.serverReflectionInfo(
      (async function* () {
        yield { messageRequest: { case: "listServices", value: "" } };
      })(),
    )) {
      expect(answer.messageResponse.case).toBe("listServicesResponse");
      break;
    }
  });

  it("refuses forged, replayed and re-targeted credentials", async () => {
    const caller = { actorId: "admin", workspaceId: "default", scopes: ["*"] };
    const setCaller: Interceptor = (next) => (req) => {
      req.header.set(callerHeaders.actor, caller.actorId);
      req.header.set(callerHeaders.workspace, caller.workspaceId);
      req.header.set(callerHeaders.scopes, caller.scopes.join(" "));
      return next(req);
    };
    // Signed with another secret.
    const forged = sessionsAt(tasks.address.url, [
      setCaller,
      createMeshClientInterceptor(MeshCredentials.generate(), "gateway"),
    ]);
    const forgedError = await forged.listSessions({ workspaceId: "default" }).catch((e) => e);
    expect(forgedError.code).toBe(16);
    expect(errorDetailOf(forgedError)?.metadata.problem).toBe("bad_signature");

    const real = new MeshCredentials(SECRET);
    const withToken =
      (token: string, actor = caller.actorId): Interceptor =>
      (next) =>
      (req) => {
        req.header.set(callerHeaders.actor, actor);
        req.header.set(callerHeaders.workspace, caller.workspaceId);
        req.header.set(callerHeaders.scopes, caller.scopes.join(" "));
        req.header.set(meshHeader, token);
        return next(req);
      };
    // A real credential for another method is no good here.
    const otherMethod = real.sign("gateway", "/trellis.tasks.v1.SessionService/GetSession", caller);
    const retargeted = await sessionsAt(tasks.address.url, [withToken(otherMethod)])
      .listSessions({ workspaceId: "default" })
      .catch((e) => e);
    expect(retargeted.code).toBe(16);
    // Nor for another caller (headers changed after signing).
    const listToken = real.sign("gateway", "/trellis.tasks.v1.SessionService/ListSessions", caller);
    const otherCaller = await sessionsAt(tasks.address.url, [withToken(listToken, "mallory")])
      .listSessions({ workspaceId: "default" })
      .catch((e) => e);
    expect(otherCaller.code).toBe(16);
    // An expired one is refused too.
    const old = new MeshCredentials(SECRET, { now: () => Date.now() - 10 * 60_000 });
    const expired = old.sign("gateway", "/trellis.tasks.v1.SessionService/ListSessions", caller);
    const late = await sessionsAt(tasks.address.url, [withToken(expired)])
      .listSessions({ workspaceId: "default" })
      .catch((e) => e);
    expect(errorDetailOf(late)?.metadata.problem).toBe("expired");
    // The genuine article works: this is what the gateway sends.
    const ok = await sessionsAt(tasks.address.url, [withToken(listToken)]).listSessions({
      workspaceId: "default",
    });
    expect(ok.sessions).toBeDefined();
  });

  it("refuses direct REST calls to an internal service's HTTP handler", async () => {
    const url = `${receipts.address.url}/v1/receipts/public-keys`;
    const plain = await fetch(url);
    expect(plain.status).toBe(401);
    const body = (await plain.json()) as { error: { code: string; type: string } };
    expect(body.error).toMatchObject({ code: "unauthenticated", type: "auth_error" });
    const spoofed = await fetch(url, {
      headers: { [callerHeaders.actor]: "admin", [callerHeaders.workspace]: "default" },
    });
    expect(spoofed.status).toBe(401);
    const signed = await fetch(url, {
      headers: {
        [meshHeader]: new MeshCredentials(SECRET).sign(
          "gateway",
          meshHttpTarget("GET", "/v1/receipts/public-keys"),
          undefined,
        ),
      },
    });
    expect(signed.status).toBe(200);
  });

  it("serves everything through the gateway: REST, delegated receipts, gRPC", async () => {
    const api = harnClient(gatewayA.address.url, ADMIN_KEY);
    const session = await api.post("/v1/sessions", { workspace_id: "default" });
    expect(session.status).toBe(201);
    const task = await api.post(`/v1/sessions/${session.json.id}/tasks`, { input: "through" });
    expect(task.status).toBe(202);
    expect(task.json.created_by).toBe("admin");
    const receipts = await poll(
      async () => {
        const r = await api.get(`/v1/tasks/${task.json.id}/receipts`);
        return r.status === 200 && r.json.data.length > 0 ? r.json.data : undefined;
      },
      { timeoutMs: 30_000, what: "a receipt through the gateway" },
    );
    expect((await api.get(`/v1/receipts/${receipts[0].id}`)).status).toBe(200);
    const viaGrpc = await sessionsAt(gatewayB.address.url).getSession(
      { sessionId: session.json.id },
      { headers: { authorization: `Bearer ${ADMIN_KEY}` } },
    );
    expect(viaGrpc.session?.id).toBe(session.json.id);
  });

  it("reports a gateway whose service credential is refused as a fault of its own, not the client's", async () => {
    const misconfigured = await runService(gatewayService, {
      env: {
        ...deployment.env,
        // Another deployment's secret: the tasks service refuses its calls.
        TRELLIS_MESH_SECRET: randomBytes(32).toString("base64url"),
        TRELLIS_API_KEY: ADMIN_KEY,
        TRELLIS_TASKS_URL: tasks.address.url,
        TRELLIS_RECEIPTS_URL: receipts.address.url,
      },
      handleSignals: false,
    });
    try {
      const rest = await harnClient(misconfigured.address.url, ADMIN_KEY).get("/v1/sessions");
      expect(rest.status).toBe(502);
      expect(rest.json.error).toMatchObject({
        code: "upstream_unavailable",
        details: { reason: "service_credential_refused" },
      });
      const grpc = await sessionsAt(misconfigured.address.url)
        .listSessions({}, { headers: { authorization: `Bearer ${ADMIN_KEY}` } })
        .catch((e) => e);
      expect(grpc.code).toBe(14);
    } finally {
      await misconfigured.close();
    }
  });

  it("stops a key revoked on one gateway replica on the other at its notice, before the cache's TTL", async () => {
    const a = harnClient(gatewayA.address.url, ADMIN_KEY);
    const created = await a.post("/v1/api-keys", { name: "replicated", scopes: ["sessions:read"] });
    expect(created.status).toBe(201);
    const onB = harnClient(gatewayB.address.url, created.json.key);
    expect((await onB.get("/v1/sessions")).status).toBe(200);
    expect((await onB.get("/v1/sessions")).status).toBe(200);
    expect((await a.post(`/v1/api-keys/${created.json.id}/revoke`)).status).toBe(200);
    // B hears of the revocation by NOTIFY, delivered after A's commit and so
    // possibly after A's answer: a request or two may still pass in between.
    // Well under the cache's 5 s TTL, so it is the notice that stops the key.
    const refused = await poll(
      async () => {
        const answer = await onB.get("/v1/sessions");
        return answer.status === 200 ? undefined : answer;
      },
      { timeoutMs: 2500, what: "gateway B refusing the revoked key" },
    );
    expect(refused.status).toBe(401);
    const overGrpc = await sessionsAt(gatewayB.address.url)
      .listSessions({}, { headers: { authorization: `Bearer ${created.json.key}` } })
      .catch((e) => e);
    expect(overGrpc.code).toBe(16);
  });

  it("accepts a token from one replica on another (shared configured key); a keyless gateway issues none", async () => {
    const a = harnClient(gatewayA.address.url, ADMIN_KEY);
    const registered = await a.post("/v1/oauth-clients", {
      name: "replicas",
      scopes: ["sessions:read"],
    });
    const client = { id: registered.json.client_id, secret: registered.json.client_secret };
    const issued = await requestToken(gatewayA.address.url, {
      basic: client,
      form: { grant_type: "client_credentials" },
    });
    expect(issued.status).toBe(200);
    const onB = harnClient(gatewayB.address.url, issued.json.access_token);
    expect((await onB.get("/v1/sessions")).status).toBe(200);
    const jwksA = await fetch(`${gatewayA.address.url}/.well-known/jwks.json`).then((r) =>
      r.json(),
    );
    const jwksB = await fetch(`${gatewayB.address.url}/.well-known/jwks.json`).then((r) =>
      r.json(),
    );
    expect(jwksA).toEqual(jwksB);

    const fromC = await requestToken(gatewayC.address.url, {
      basic: client,
      form: { grant_type: "client_credentials" },
    });
    expect(fromC.status).toBe(503);
    expect(fromC.json.error).toBe("temporarily_unavailable");
    const jwksC = (await fetch(`${gatewayC.address.url}/.well-known/jwks.json`).then((r) =>
      r.json(),
    )) as { keys: unknown[] };
    expect(jwksC.keys).toEqual([]);
    // C does not know A's key: A's token means nothing there.
    expect(
      (await harnClient(gatewayC.address.url, issued.json.access_token).get("/v1/sessions")).status,
    ).toBe(401);
    // Revoking the client on C stops its tokens on A and B.
    const c = harnClient(gatewayC.address.url, ADMIN_KEY);
    expect((await c.post(`/v1/oauth-clients/${client.id}/revoke`)).status).toBe(200);
    expect((await onB.get("/v1/sessions")).status).toBe(401);
  });
});
