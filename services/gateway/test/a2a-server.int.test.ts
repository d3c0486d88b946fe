// Trellis agents over A2A, in both modes, driven by the official @a2a-js/sdk
// client given only a card URL and an API key: a turn, a streamed turn, an
// input-required turn resumed by a second message (exactly once), a long
// turn canceled (the backend confirms), another workspace's task not found,
// and the refusals before a call (no key, a restricted key, another
// workspace's agent).
import { generateKeyPairSync } from "node:crypto";
import { type Message, type StreamResponse, TaskState } from "@a2a-js/sdk";
import { harnClient, type Json, requestToken } from "@trellis/gateway/testing";
import {
  a2aClient,
  a2aText,
  a2aTextMessage,
  asA2aTask,
  postA2aRpc,
} from "@trellis/testkit/a2a-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";
import {
  createScriptedAgent,
  echoAgent,
  gatedToolAgent,
  STREAMED_TAIL,
  streamingAgent,
} from "./support/ui-fixtures.js";

// A configured signing key: the gateway issues OAuth2 tokens in both modes.
const signingKey = String(
  generateKeyPairSync("ec", { namedCurve: "P-256" }).privateKey.export({
    format: "pem",
    type: "pkcs8",
  }),
);
const modes = gatewayModes({ name: "a2asrv", env: { TRELLIS_OAUTH_SIGNING_KEY: signingKey } });

function send(message: Message, returnImmediately = false) {
  return {
    tenant: "",
    message,
    configuration: {
      acceptedOutputModes: [],
      taskPushNotificationConfig: undefined,
      returnImmediately,
    },
    metadata: undefined,
  };
}

describe.each(modes)("A2A server, $mode", ({ start }) => {
  let trellis: Running;
  let key: string;
  const cards: Record<string, string> = {};

  beforeAll(async () => {
    trellis = await start();
    const admin = harnClient(trellis.url, ADMIN_KEY);
    const agents = {
      echo: await createScriptedAgent(admin, "a2a-echo", echoAgent()),
      slow: await createScriptedAgent(admin, "a2a-slow", echoAgent(60_000)),
      gated: await createScriptedAgent(admin, "a2a-gated", gatedToolAgent()),
      streaming: await createScriptedAgent(admin, "a2a-streaming", streamingAgent(4, 10)),
    };
    for (const [name, id] of Object.entries(agents)) {
      cards[name] = `${trellis.url}/a2a/${id}/.well-known/agent-card.json`;
    }
    const created = await admin.post("/v1/api-keys", {
      name: "a2a-client",
      scopes: ["sessions:write", "tasks:write", "tasks:read", "events:read"],
    });
    expect(created.status).toBe(201);
    key = created.json.key;
  }, 120_000);

  afterAll(async () => {
    await trellis?.close();
  });

  it("serves the cards: each agent's and the default agent's at the well-known path", async () => {
    const card: Json = await (await fetch(cards.echo as string)).json();
    expect(card.supportedInterfaces[0]).toMatchObject({
      protocolBinding: "JSONRPC",
      protocolVersion: "1.0",
    });
    expect(card.supportedInterfaces[0].url).toMatch(/\/a2a\/[^/]+$/);
    expect(card.capabilities).toMatchObject({ streaming: true, pushNotifications: false });
    expect(card.securitySchemes.bearer.httpAuthSecurityScheme.scheme).toBe("Bearer");
    const unknown = await fetch(`${trellis.url}/a2a/agent_nope/.well-known/agent-card.json`);
    expect(unknown.status).toBe(404);
    const wellKnown = await fetch(`${trellis.url}/.well-known/agent-card.json`);
    expect(wellKnown.status).toBe(200);
    const defaultCard: Json = await wellKnown.json();
    expect(defaultCard.supportedInterfaces[0].url).toBe(`${trellis.url}/a2a/agent_echo`);
    // The Harn agent card carries the same card.
    const harn = await harnClient(trellis.url, ADMIN_KEY).get("/v1/agent-card", {
      key: null,
      version: null,
    });
    expect(harn.json.a2a_card).toEqual(defaultCard);
  });

  it("sends a message and gets the reply", async () => {
    const client = await a2aClient(cards.echo as string, key);
    const task = asA2aTask(await client.sendMessage(send(a2aTextMessage("hello"))));
    expect(task.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(a2aText(task.status?.message)).toBe("Echo: hello");
    expect(task.artifacts[0]?.parts[0]?.content).toEqual({ $case: "text", value: "Echo: hello" });
    // The context continues: the next turn runs in the same session.
    const next = asA2aTask(
      await client.sendMessage(send(a2aTextMessage("again", { contextId: task.contextId }))),
    );
    expect(next.contextId).toBe(task.contextId);
    expect(next.id).not.toBe(task.id);
    expect(a2aText(next.status?.message)).toBe("Echo: again");
    const read = await client.getTask({ tenant: "", id: task.id });
    expect(read.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
  });

  it("streams a turn: the reply in chunks, then the final state", async () => {
    const client = await a2aClient(cards.streaming as string, key);
    const events: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(send(a2aTextMessage("Lyon")))) {
      events.push(event);
    }
    expect(events[0]?.payload?.$case).toBe("task");
    const chunks = events.flatMap((e) =>
      e.payload?.$case === "artifactUpdate" && !e.payload.value.lastChunk
        ? [
            e.payload.value.artifact?.parts
              .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
              .join(""),
          ]
        : [],
    );
    const reply = `Streaming reply to Lyon: ${STREAMED_TAIL}`;
    expect(chunks.length).toBeGreaterThan(3);
    expect(chunks.join("")).toBe(reply);
    const last = events.at(-1)?.payload;
    expect(last?.$case).toBe("statusUpdate");
    if (last?.$case !== "statusUpdate") return;
    expect(last.value.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    const full = events.find(
      (e) => e.payload?.$case === "artifactUpdate" && e.payload.value.lastChunk,
    );
    expect(
      full?.payload?.$case === "artifactUpdate" && full.payload.value.artifact?.parts[0]?.content,
    ).toEqual({
      $case: "text",
      value: reply,
    });
  });

  it("resumes an input-required turn with a second message, exactly once", async () => {
    const client = await a2aClient(cards.gated as string, key);
    const first = asA2aTask(await client.sendMessage(send(a2aTextMessage("Paris"))));
    expect(first.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    expect(a2aText(first.status?.message)).toBe("It is sunny. May I write the forecast to a file?");
    const approval = a2aTextMessage("yes", { taskId: first.id, contextId: first.contextId });
    const resumed = asA2aTask(await client.sendMessage(send(approval)));
    expect(resumed.id).toBe(first.id);
    expect(resumed.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(a2aText(resumed.status?.message)).toBe("Done: the forecast is in forecast.txt.");
    // A second answer finds nothing waiting: the turn ran once.
    await expect(
      client.sendMessage(send(a2aTextMessage("yes", { taskId: first.id }))),
    ).rejects.toThrow(/has ended/);
    const events = await harnClient(trellis.url, ADMIN_KEY).get(
      `/v1/tasks/${first.id}/events?limit=200`,
    );
    const resumes = (events.json.data as { event: string }[]).filter(
      (e) => e.event === "user.tool_confirmation",
    );
    expect(resumes.length).toBe(1);
  });

  it("streams a resumed turn and resubscribes to a running one", async () => {
    const gated = await a2aClient(cards.gated as string, key);
    const first: StreamResponse[] = [];
    for await (const event of gated.sendMessageStream(send(a2aTextMessage("Nice"))))
      first.push(event);
    const paused = first.at(-1)?.payload;
    expect(paused?.$case === "statusUpdate" && paused.value.status?.state).toBe(
      TaskState.TASK_STATE_INPUT_REQUIRED,
    );
    const taskId = first[0]?.payload?.$case === "task" ? first[0].payload.value.id : "";
    const second: StreamResponse[] = [];
    const approve = a2aTextMessage("approve", { taskId });
    for await (const event of gated.sendMessageStream(send(approve))) second.push(event);
    const done = second.at(-1)?.payload;
    expect(done?.$case === "statusUpdate" && done.value.status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    expect(done?.$case === "statusUpdate" && a2aText(done.value.status?.message)).toBe(
      "Done: the forecast is in forecast.txt.",
    );

    // A running turn (started without waiting), followed from another call.
    const streaming = await a2aClient(cards.streaming as string, key);
    const started = asA2aTask(await streaming.sendMessage(send(a2aTextMessage("Nantes"), true)));
    const followed: StreamResponse[] = [];
    for await (const event of streaming.resubscribeTask({ tenant: "", id: started.id })) {
      followed.push(event);
    }
    expect(followed[0]?.payload?.$case).toBe("task");
    const end = followed.at(-1)?.payload;
    expect(end?.$case === "statusUpdate" && end.value.status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    const full = followed.find(
      (e) => e.payload?.$case === "artifactUpdate" && e.payload.value.lastChunk,
    );
    expect(
      full?.payload?.$case === "artifactUpdate" && full.payload.value.artifact?.parts[0]?.content,
    ).toEqual({ $case: "text", value: `Streaming reply to Nantes: ${STREAMED_TAIL}` });
  });

  it("cancels a long turn and the backend confirms", async () => {
    const client = await a2aClient(cards.slow as string, key);
    const started = asA2aTask(await client.sendMessage(send(a2aTextMessage("slowly"), true)));
    expect([TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING]).toContain(
      started.status?.state,
    );
    const canceled = await client.cancelTask({ tenant: "", id: started.id, metadata: undefined });
    expect(canceled.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    const read = await client.getTask({ tenant: "", id: started.id });
    expect(read.status?.state).toBe(TaskState.TASK_STATE_CANCELED);
    await expect(
      client.cancelTask({ tenant: "", id: started.id, metadata: undefined }),
    ).rejects.toThrow(/ended/);
  }, 30_000);

  it("takes OAuth2 access tokens with their scopes and agent restriction", async () => {
    const admin = harnClient(trellis.url, ADMIN_KEY);
    const echoId = (cards.echo as string).split("/")[4] as string;
    const tokenFor = async (scopes: string[], agentIds?: string[]) => {
      const registered = await admin.post("/v1/oauth-clients", {
        name: "a2a-oauth",
        scopes,
        ...(agentIds ? { agent_ids: agentIds } : {}),
      });
      expect(registered.status).toBe(201);
      const token = await requestToken(trellis.url, {
        basic: { id: registered.json.client_id, secret: registered.json.client_secret },
        form: { grant_type: "client_credentials" },
      });
      expect(token.status).toBe(200);
      return token.json.access_token as string;
    };
    const full = await tokenFor(
      ["sessions:write", "tasks:write", "tasks:read", "events:read"],
      [echoId],
    );
    const client = await a2aClient(cards.echo as string, full);
    const task = asA2aTask(await client.sendMessage(send(a2aTextMessage("by token"))));
    expect(a2aText(task.status?.message)).toBe("Echo: by token");
    // The token's client may not use the gated agent: refused before the call.
    const other = await a2aClient(cards.gated as string, full);
    await expect(other.sendMessage(send(a2aTextMessage("no")))).rejects.toThrow(/403/);
    // A read-only token reads but cannot send.
    const reader = await a2aClient(cards.echo as string, await tokenFor(["tasks:read"]));
    expect((await reader.getTask({ tenant: "", id: task.id })).id).toBe(task.id);
    await expect(reader.sendMessage(send(a2aTextMessage("no")))).rejects.toThrow(/403/);
  });

  it("does not find another workspace's task, and refuses before the call", async () => {
    const admin = harnClient(trellis.url, ADMIN_KEY);
    const client = await a2aClient(cards.echo as string, key);
    const task = asA2aTask(await client.sendMessage(send(a2aTextMessage("mine"))));

    const other = await admin.post("/v1/api-keys", {
      name: "other-workspace",
      workspace_id: "ws_a2a_other",
      scopes: ["sessions:write", "tasks:write", "tasks:read", "events:read"],
    });
    expect(other.status).toBe(201);
    // The other workspace's key reaches the shared default agent, not this task.
    const stranger = await a2aClient(`${trellis.url}/.well-known/agent-card.json`, other.json.key);
    await expect(stranger.getTask({ tenant: "", id: task.id })).rejects.toThrow(/not found/i);
    await expect(
      stranger.cancelTask({ tenant: "", id: task.id, metadata: undefined }),
    ).rejects.toThrow(/not found/i);
    // … and the default workspace's own agents are absent to it.
    const rpc = (body: object, bearer?: string) =>
      postA2aRpc(
        `${trellis.url}/a2a/${(cards.echo as string).split("/")[4]}`,
        JSON.stringify(body),
        bearer,
      );
    const getTask = { jsonrpc: "2.0", id: 1, method: "GetTask", params: { id: task.id } };
    expect((await rpc(getTask, other.json.key)).status).toBe(404);
    const noKey = await rpc(getTask);
    expect(noKey.status).toBe(401);
    expect(noKey.headers.get("www-authenticate")).toMatch(/^Bearer/);

    // Another workspace's agent: its card only for that workspace's credentials.
    const theirs = await admin.post("/v1/personas", {
      name: "theirs",
      workspace_id: "ws_a2a_other",
      entry_workflow: "scripted",
      definition: { entry: "r", nodes: { r: { update: { messages: [] } } }, edges: [] },
    });
    expect(theirs.status).toBe(201);
    const theirCard = `${trellis.url}/a2a/${theirs.json.id}/.well-known/agent-card.json`;
    expect((await fetch(theirCard)).status).toBe(404);
    const keyOf = (k: string) => ({ headers: { authorization: `Bearer ${k}` } });
    expect((await fetch(theirCard, keyOf(key))).status).toBe(404);
    expect((await fetch(theirCard, keyOf(other.json.key))).status).toBe(200);

    const restricted = await admin.post("/v1/api-keys", {
      name: "restricted",
      scopes: ["tasks:read"],
      agent_ids: ["agent_echo"],
    });
    expect(restricted.status).toBe(201);
    expect((await rpc(getTask, restricted.json.key)).status).toBe(403);
    // A key without tasks:write cannot send.
    const reader = await admin.post("/v1/api-keys", { name: "reader", scopes: ["tasks:read"] });
    const sendCall = {
      jsonrpc: "2.0",
      id: 2,
      method: "SendMessage",
      params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] } },
    };
    expect((await rpc(sendCall, reader.json.key)).status).toBe(403);
    const ok = await rpc(getTask, reader.json.key);
    expect(ok.status).toBe(200);
    const body: Json = await ok.json();
    expect(body.result.id).toBe(task.id);
  });
});
