// No credential and no vault secret is ever written where it must not be
// (Harn v1: "API keys MUST NOT be logged in Events, Receipts, or error
// details"; "Events and receipts MUST redact secret material"): a
// representative flow with the admin key, a created API key, an OAuth client
// secret and its access token, an external issuer's token and a vault-like
// secret inside a message (in its non-public parts, as a vault would inject
// it), over REST, SSE and gRPC, including refused attempts — then every log
// line (debug level), every event in the event log, every receipt, and the
// gateway's stored records are searched for each secret. None may appear.
// A real vault secret too: stored through the vault API and read by a harness
// tool (`context.secret("vlt_weather/WEATHER_API_KEY")`) in a recorded turn;
// it must not appear in the vault's own stored rows either (sealed at rest).
import { createHash, randomBytes } from "node:crypto";
import { toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { adaptersService } from "@trellis/adapters";
import { chatService } from "@trellis/chat";
import { ChatService } from "@trellis/contracts/chat";
import { EventSchema } from "@trellis/contracts/core";
import { AgentService, SessionService } from "@trellis/contracts/tasks";
import {
  enqueueChat,
  type RecordedServer,
  startRecordedServer,
  weatherTurn,
} from "@trellis/execution/testing";
import { gatewayService } from "@trellis/gateway";
import { harnClient, poll, requestToken, TestIdentityProvider } from "@trellis/gateway/testing";
import { chatToMessage } from "@trellis/messages";
import { EMBEDDED_OUTBOX_SCHEMA, type EmbeddedTrellis, startEmbedded } from "@trellis/platform";
import { receiptsService } from "@trellis/receipts";
import { createLogger } from "@trellis/runtime";
import { readOutbox } from "@trellis/storage";
import { tasksService } from "@trellis/tasks";
import { sql } from "kysely";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const ADMIN_KEY = `trellis_sk_${randomBytes(32).toString("base64url")}`;
// Shaped like a provider key and like a key=value credential, as a vault
// would inject it into a tool or a prompt.
const VAULT_SECRET = `sk-vault-${randomBytes(24).toString("hex")}`;
// Stored in a vault and read by a harness tool (services/adapters/test/vault-tools.ts).
const STORED_VAULT_SECRET = `wx-vault-${randomBytes(24).toString("hex")}`;
const vaultToolsModule = new URL("../services/adapters/test/vault-tools.ts", import.meta.url)
  .pathname;

describe("secrets never reach logs, events or receipts", () => {
  let trellis: EmbeddedTrellis;
  let idp: TestIdentityProvider;
  let provider: RecordedServer;
  const logLines: string[] = [];
  const secrets = new Map<string, string>([
    ["admin API key", ADMIN_KEY],
    ["vault secret", VAULT_SECRET],
    ["stored vault secret", STORED_VAULT_SECRET],
  ]);

  beforeAll(async () => {
    idp = await TestIdentityProvider.start();
    provider = await startRecordedServer();
    trellis = await startEmbedded({
      services: [gatewayService, tasksService, chatService, receiptsService, adaptersService],
      port: 0,
      logger: createLogger({
        service: "trellis",
        level: "debug",
        write: (line) => logLines.push(line),
      }),
      env: {
        TRELLIS_API_KEY: ADMIN_KEY,
        TRELLIS_LOG_LEVEL: "debug",
        TRELLIS_OAUTH_EXTERNAL_ISSUER: idp.issuer,
        TRELLIS_OAUTH_EXTERNAL_JWKS_URL: idp.jwksUrl,
        OPENAI_API_KEY: "sk-test-secrets-grep",
        OPENAI_BASE_URL: `${provider.url}/v1`,
        TRELLIS_HARNESS_TOOLS: vaultToolsModule,
      },
    });
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
    await idp?.close();
    await provider?.close();
  });

  it("runs a representative flow with every kind of credential", async () => {
    const base = trellis.address.url;
    const admin = harnClient(base, ADMIN_KEY);

    // An API key, used for a whole turn over REST and SSE.
    const created = await admin.post("/v1/api-keys", {
      name: "flow",
      scopes: ["sessions:read", "sessions:write", "tasks:read", "tasks:write", "events:read"],
    });
    expect(created.status).toBe(201);
    secrets.set("API key", created.json.key);
    const api = harnClient(base, created.json.key);
    // An agent that answers without repeating its input. (The default echo
    // agent copies every text part of the input, non-public ones included,
    // into its public reply: what an agent says is its own business, and is
    // not what this test is about.)
    const persona = await admin.post("/v1/personas", {
      name: "deployer",
      entry_workflow: "scripted",
      definition: {
        entry: "reply",
        nodes: { reply: { update: { messages: [{ role: "assistant", content: "deployed" }] } } },
        edges: [{ from: "reply", to: "END" }],
      },
    });
    expect(persona.status).toBe(201);
    const session = await api.post("/v1/sessions", { persona_id: persona.json.id });
    expect(session.status).toBe(201);
    const stream = await api.stream(`/v1/sessions/${session.json.id}/events/stream`);
    const task = await api.post(`/v1/sessions/${session.json.id}/tasks`, {
      input: {
        role: "user",
        parts: [
          { type: "text", text: "deploy the service", visibility: "public" },
          { type: "text", text: `password=${VAULT_SECRET}`, visibility: "internal" },
          { type: "text", text: `api_key: ${VAULT_SECRET}`, visibility: "receipt_only" },
        ],
      },
    });
    expect(task.status).toBe(202);
    await stream.until((f) => f.event === "task.completed");
    stream.close();
    expect((await api.get(`/v1/tasks/${task.json.id}/events`)).status).toBe(200);

    // An OAuth client, its secret, its token on REST and gRPC.
    const client = await admin.post("/v1/oauth-clients", {
      name: "flow",
      scopes: ["sessions:read", "tasks:write", "agents:write"],
    });
    secrets.set("OAuth client secret", client.json.client_secret);
    const issued = await requestToken(base, {
      basic: { id: client.json.client_id, secret: client.json.client_secret },
      form: { grant_type: "client_credentials" },
    });
    expect(issued.status).toBe(200);
    secrets.set("access token", issued.json.access_token);
    const auth = { headers: { authorization: `Bearer ${issued.json.access_token}` } };
    const transport = createGrpcTransport({ baseUrl: base });
    await createClient(SessionService, transport).getSession({ sessionId: session.json.id }, auth);
    const { agent } = await createClient(AgentService, transport).createAgent(
      {
        agent: {
          name: "echo",
          backend: "scripted",
          definition: {
            entry: "reply",
            nodes: { reply: { update: { messages: [{ role: "assistant", content: "ok" }] } } },
            edges: [{ from: "reply", to: "END" }],
          },
        },
      },
      auth,
    );
    const turn = await createClient(ChatService, transport).send(
      {
        sessionId: `ses_secrets_${randomBytes(4).toString("hex")}`,
        agentId: agent?.id ?? "",
        message: chatToMessage({ role: "user", content: "hello over gRPC" }),
      },
      auth,
    );
    expect(turn.outcome?.kind.case).toBe("completed");

    // An external issuer's token.
    const external = await idp.token({
      sub: "svc",
      aud: "trellis",
      workspace: "default",
      scope: "sessions:read",
    });
    secrets.set("external token", external);
    expect((await harnClient(base, external).get(`/v1/sessions/${session.json.id}`)).status).toBe(
      200,
    );

    // Refused attempts: none of them may echo what was sent.
    const wrongKey = `trellis_sk_${randomBytes(32).toString("base64url")}`;
    secrets.set("unknown key", wrongKey);
    const refused = await harnClient(base, wrongKey).get("/v1/sessions");
    expect(refused.status).toBe(401);
    expect(refused.text).not.toContain(wrongKey);
    const expired = await idp.token(
      { sub: "svc", aud: "trellis", workspace: "default", scope: "sessions:read" },
      { expiresInSec: -600 },
    );
    secrets.set("expired token", expired);
    expect((await harnClient(base, expired).get("/v1/sessions")).status).toBe(401);
    const badSecret = `trellis_cs_${randomBytes(32).toString("base64url")}`;
    secrets.set("wrong client secret", badSecret);
    const badToken = await requestToken(base, {
      basic: { id: client.json.client_id, secret: badSecret },
      form: { grant_type: "client_credentials" },
    });
    expect(badToken.status).toBe(401);
    expect(JSON.stringify(badToken.json)).not.toContain(badSecret);
    const grpcRefused = await createClient(SessionService, transport)
      .getSession(
        { sessionId: session.json.id },
        { headers: { authorization: `Bearer ${wrongKey}` } },
      )
      .catch((error: Error) => error);
    expect(String(grpcRefused)).not.toContain(wrongKey);

    // Revoked: the key is refused and still never written anywhere.
    await admin.post(`/v1/api-keys/${created.json.id}/revoke`);
    expect((await api.get("/v1/sessions")).status).toBe(401);

    // A vault secret, read by a harness tool of an agent the vault allows.
    const weather = await admin.post("/v1/personas", {
      name: "weather",
      entry_workflow: "harness",
      definition: {
        provider: "openai",
        model: "gpt-4o-mini",
        tools: ["get_weather"],
        stream: false,
      },
    });
    expect(weather.status).toBe(201);
    const vault = await admin.post("/v1/vaults", {
      id: "vlt_weather",
      workspace_id: "default",
      provider: "trellis",
      capabilities: ["read", "write"],
      allowed_agent_ids: [weather.json.id],
    });
    expect(vault.status).toBe(201);
    const stored = await admin.request("PUT", "/v1/vaults/vlt_weather/secrets/WEATHER_API_KEY", {
      body: { value: STORED_VAULT_SECRET },
    });
    expect(stored.status).toBe(200);
    enqueueChat(provider, ...weatherTurn({ stream: false }));
    const weatherSession = await admin.post("/v1/sessions", { persona_id: weather.json.id });
    const weatherTask = await admin.post(`/v1/sessions/${weatherSession.json.id}/tasks`, {
      input: "What's the weather in Paris?",
    });
    expect(weatherTask.status).toBe(202);
    await poll(
      async () => {
        const t = await admin.get(`/v1/tasks/${weatherTask.json.id}`);
        if (t.json.status === "FAILED") throw new Error(`weather task failed: ${t.text}`);
        return t.json.status === "COMPLETED" ? true : undefined;
      },
      { timeoutMs: 30_000, what: "the weather task" },
    );
    // The tool got the value (its hash proves it) and the transcript has only the hash.
    const transcript = await admin.get(`/v1/sessions/${weatherSession.json.id}/messages`);
    expect(transcript.text).toContain(
      createHash("sha256").update(STORED_VAULT_SECRET).digest("hex"),
    );

    // Receipts are issued for the finished tasks.
    await poll(
      async () => {
        const r = await admin.get(`/v1/tasks/${task.json.id}/receipts`);
        return r.status === 200 && r.json.data.length > 0 ? true : undefined;
      },
      { timeoutMs: 20_000, what: "a receipt" },
    );
  }, 120_000);

  it("finds none of them in any log line, event, receipt or gateway record", async () => {
    expect(secrets.size).toBeGreaterThanOrEqual(10);
    const db = trellis.contexts.get("gateway")!.db;

    const events: string[] = [];
    let after: bigint | undefined;
    for (;;) {
      const page = await readOutbox(db, EMBEDDED_OUTBOX_SCHEMA, {
        limit: 500,
        ...(after === undefined ? {} : { afterPosition: after }),
      });
      for (const entry of page) events.push(JSON.stringify(toJson(EventSchema, entry.event)));
      if (page.length === 0) break;
      after = page.at(-1)?.position;
    }
    // The raw stored bytes too (strings travel as UTF-8 in the protobuf).
    const raw = await sql<{
      body: Uint8Array;
    }>`select body from ${sql.id(EMBEDDED_OUTBOX_SCHEMA, "outbox")}`.execute(db.kysely);
    const rawEvents = raw.rows.map((r) => Buffer.from(r.body).toString("latin1"));
    const receipts = (
      await sql<{ document: string }>`select document from receipts.receipts`.execute(db.kysely)
    ).rows.map((r) => r.document);
    const gatewayRecords = await Promise.all(
      ["api_keys", "oauth_clients", "idempotency_keys"].map(async (table) =>
        JSON.stringify(
          (await sql`select * from ${sql.id("gateway", table)}`.execute(db.kysely)).rows,
        ),
      ),
    );
    const vaultRows = [
      JSON.stringify((await sql`select * from adapters.vault_secrets`.execute(db.kysely)).rows),
    ];
    expect(vaultRows[0]).toContain("WEATHER_API_KEY");

    // The search is real: the flow produced all of them.
    expect(logLines.length).toBeGreaterThan(10);
    expect(logLines.join("")).toContain("access token issued");
    expect(events.length).toBeGreaterThan(10);
    expect(receipts.length).toBeGreaterThan(0);
    expect(events.join("\n")).toContain("deploy the service");

    const found: string[] = [];
    for (const [what, secret] of secrets) {
      const places: [string, string[]][] = [
        ["log", logLines],
        ["event", events],
        ["stored event", rawEvents],
        ["receipt", receipts],
        ["gateway record", gatewayRecords],
        ["vault record", vaultRows],
      ];
      for (const [where, texts] of places) {
        const hits = texts.filter((t) => t.includes(secret)).length;
        if (hits > 0) found.push(`${what} in ${hits} ${where}(s)`);
      }
    }
    expect(found).toEqual([]);
  });
});
