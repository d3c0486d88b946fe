/**
 * The shared session feed (src/feed/) against a real tasks service on
 * PostgreSQL + JetStream: open streams survive a restart of the tasks
 * service with no event lost or repeated; a consumer that falls behind is cut
 * off with `slow_consumer` without holding up the others; the feed stops
 * with its last subscriber.
 */
import type { DescService } from "@bufbuild/protobuf";
import { create } from "@bufbuild/protobuf";
import type { Client } from "@connectrpc/connect";
import { EventSchema } from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import { EventService } from "@trellis/contracts/tasks";
import { harnClient, poll } from "@trellis/gateway/testing";
import {
  createMeshClientInterceptor,
  processMeshCredentials,
  type RunningService,
  type ServiceClients,
} from "@trellis/platform";
import { createServiceClient, isTrellisError } from "@trellis/runtime";
import { tasksService } from "@trellis/tasks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayService } from "../src/definition.js";
import { EventFeeds, FeedItem, type FeedSubscriber } from "../src/feed/event-feeds.js";
import { type FollowOptions, followSession } from "../src/feed/follow.js";
import { ADMIN_KEY } from "./support/conformance.js";
import { openDeployment, type TestDeployment } from "./support/deployment.js";
import { allEvents, createScriptedAgent, echoAgent } from "./support/ui-fixtures.js";
import { openWs } from "./support/ws-client.js";

const terminal = new Set(["COMPLETED", "FAILED", "CANCELED"]);

describe("the shared session feed against a real tasks service", () => {
  let deployment: TestDeployment;
  let tasks: RunningService;
  let gateway: RunningService;
  let api: ReturnType<typeof harnClient>;
  let echo: string;
  let clients: ServiceClients;

  beforeAll(async () => {
    deployment = await openDeployment("trellis_feed_upstream", { prefix: "feedup" });
    tasks = await deployment.start(tasksService);
    gateway = await deployment.start(gatewayService, {
      TRELLIS_API_KEY: ADMIN_KEY,
      TRELLIS_SSE_HEARTBEAT: "200ms",
      TRELLIS_TASKS_URL: tasks.address.url,
    });
    api = harnClient(gateway.address.url, ADMIN_KEY);
    echo = await createScriptedAgent(api, "echo-upstream", echoAgent(20));
    // The mesh clients a gateway in this process would use (for the feed-level cases).
    const sign = createMeshClientInterceptor(processMeshCredentials(), "gateway");
    const cache = new Map<string, Client<DescService>>();
    clients = {
      get<T extends DescService>(service: T): Client<T> {
        let client = cache.get(service.typeName);
        if (!client) {
          client = createServiceClient(service, tasks.address.url, {
            interceptors: [sign],
          }) as Client<DescService>;
          cache.set(service.typeName, client);
        }
        return client as Client<T>;
      },
    };
  }, 120_000);

  afterAll(async () => {
    await deployment?.close();
  });

  /** The workspace of each session made (feeds are keyed by workspace and id). */
  const workspaces = new Map<string, string>();
  async function newSession(): Promise<string> {
    const session = await api.post("/v1/sessions", { persona_id: echo });
    expect(session.status).toBe(201);
    workspaces.set(session.json.id as string, session.json.workspace_id as string);
    return session.json.id as string;
  }

  function ref(sessionId: string) {
    return { workspaceId: workspaces.get(sessionId) ?? "", sessionId };
  }

  async function runTask(sessionId: string, text: string): Promise<string> {
    const task = await api.post(`/v1/sessions/${sessionId}/tasks`, {
      input: { role: "user", parts: [{ type: "text", text }] },
    });
    expect(task.status).toBe(202);
    await poll(
      async () =>
        terminal.has((await api.get(`/v1/tasks/${task.json.id}`)).json.status) ? 1 : undefined,
      { timeoutMs: 30_000, what: "the task to end" },
    );
    return task.json.id as string;
  }

  const allIds = async (sessionId: string): Promise<string[]> =>
    (await allEvents(api, sessionId)).map((e) => e.id as string);

  it("keeps open streams through a tasks service restart, with no event lost or repeated", async () => {
    const sessionId = await newSession();
    await runTask(sessionId, "before the restart");
    const sse = await api.stream(`/v1/sessions/${sessionId}/events/stream`);
    const ws = await openWs(`${gateway.address.url}/v1/sessions/${sessionId}/ws`, ADMIN_KEY);
    await ws.until((f) => f.type === "replay_complete");
    const before = await allIds(sessionId);
    await sse.until((f) => f.id === before.at(-1), 15_000);

    // The tasks service goes away and comes back on the same address.
    const port = new URL(tasks.address.url).port;
    await tasks.close();
    await new Promise((resolve) => setTimeout(resolve, 500));
    tasks = await deployment.start(tasksService, { PORT: port });

    await runTask(sessionId, "after the restart");
    const log = await allIds(sessionId);
    const last = log.at(-1)!;
    const frames = await sse.until((f) => f.id === last || f.event === "error", 45_000);
    expect(frames.filter((f) => f.event === "error")).toEqual([]);
    expect(frames.length).toBeGreaterThan(0);
    await ws.waitFor((f) => f.type === "event" && f.cursor === last, 45_000);
    const sseIds = [...before, ...frames.map((f) => f.id)];
    expect(sseIds).toEqual(log);
    expect(ws.frames.filter((f) => f.type === "event").map((f) => f.cursor)).toEqual(log);
    expect(ws.frames.filter((f) => f.type === "error")).toEqual([]);
    sse.close();
    await ws.close();
  });

  it("cuts off a consumer that falls behind, without holding up the others, and stops with its last subscriber", async () => {
    const sessionId = await newSession();
    const feeds = new EventFeeds();
    const stop = new AbortController();
    const callOptions = () => ({ signal: stop.signal });
    /** A consumer of the session's feed, from its start until `stop`, reading into `sink`. */
    const follow = (consumer: Pick<FollowOptions, "sink" | "maxQueued" | "onOverflow">) =>
      followSession({
        feeds,
        clients,
        ...ref(sessionId),
        cursor: "",
        callOptions,
        signal: stop.signal,
        ...consumer,
      });

    // A consumer that stops reading at its first live event.
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => {
      release = resolve;
    });
    let slowLive = 0;
    let overflows = 0;
    const slow = follow({
      maxQueued: 3,
      onOverflow: () => overflows++,
      sink: {
        replay: () => undefined,
        replayed: () => undefined,
        live: async () => {
          slowLive++;
          await stuck;
          return false;
        },
      },
    });
    // A healthy consumer of the same feed.
    const seen: string[] = [];
    const healthy = follow({
      sink: {
        replay: (event) => {
          seen.push(event.id);
          return false;
        },
        replayed: () => undefined,
        live: (item) => {
          seen.push(item.event.id);
          return false;
        },
      },
    });
    await poll(async () => (feeds.subscribers(ref(sessionId)) === 2 ? true : undefined), {
      what: "both consumers to join",
    });
    expect(feeds.feeds).toBe(1);

    await runTask(sessionId, "more events than the slow consumer may queue");
    const log = await allIds(sessionId);
    expect(log.length).toBeGreaterThan(5);
    await poll(async () => (seen.at(-1) === log.at(-1) ? true : undefined), {
      timeoutMs: 15_000,
      what: "the healthy consumer to see every event",
    });
    expect(seen).toEqual(log);
    expect(slowLive).toBe(1);
    // Told at once (so a transport can drop a client that reads nothing), once.
    expect(overflows).toBe(1);

    release();
    const failure = await slow.then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isTrellisError(failure)).toBe(true);
    expect(failure).toMatchObject({
      reason: "service_unavailable",
      metadata: { reason: "slow_consumer", max_queued: "3" },
    });
    expect(feeds.subscribers(ref(sessionId))).toBe(1);

    // The last subscriber leaves: the feed stops and is forgotten.
    stop.abort();
    await healthy;
    expect(feeds.subscribers(ref(sessionId))).toBe(0);
    expect(feeds.feeds).toBe(0);
  });

  it("joins the feed exactly when the client's cursor is ahead of the feed", async () => {
    const sessionId = await newSession();
    await runTask(sessionId, "some history");
    // The task's status can read COMPLETED before its last events reach the
    // log (the outbox relay publishes them after the commit): wait for the
    // terminal event, or the follow below would replay events this list lacks.
    const events = await poll(
      async () => {
        const listed = await clients
          .get(EventService)
          .listEvents({ sessionId, limit: 200 }, { signal: AbortSignal.timeout(15_000) });
        return listed.events.some((e) => e.kind === EVENT_KIND.taskCompleted)
          ? listed.events
          : undefined;
      },
      { what: "the task's terminal event in the log" },
    );
    expect(events.length).toBeGreaterThanOrEqual(6);
    // A feed that has delivered up to events[1] when the client (cursor events[3]) joins,
    // and delivers the rest later, then one new event.
    let subscriber: FeedSubscriber | undefined;
    const lagging: Pick<EventFeeds, "subscribe"> = {
      async subscribe(_clients, _sessionId, _options, joined) {
        subscriber = joined;
        return { anchor: events[1]!.id, leave: () => undefined };
      },
    };
    const fresh = create(EventSchema, { id: "evt_after_everything", sessionId });
    const replayed: string[] = [];
    const live: string[] = [];
    const stop = new AbortController();
    const following = followSession({
      feeds: lagging,
      clients,
      ...ref(sessionId),
      cursor: events[3]!.id,
      callOptions: () => ({}),
      signal: stop.signal,
      sink: {
        replay: (event) => {
          replayed.push(event.id);
          return false;
        },
        replayed: () => {
          for (const event of [...events.slice(2), fresh])
            subscriber?.deliver(new FeedItem(event, []));
        },
        live: (item) => {
          live.push(item.event.id);
          return false;
        },
      },
    });
    await poll(async () => (live.length > 0 ? true : undefined), { what: "the new event" });
    stop.abort();
    await following;
    expect(replayed).toEqual(events.slice(4).map((e) => e.id));
    expect(live).toEqual([fresh.id]);
  });

  it("refuses a cursor the log does not know", async () => {
    const sessionId = await newSession();
    const feeds = new EventFeeds();
    const outcome = await followSession({
      feeds,
      clients,
      ...ref(sessionId),
      cursor: "evt_not_in_this_log",
      callOptions: () => ({}),
      signal: new AbortController().signal,
      sink: { replay: () => undefined, replayed: () => undefined, live: () => undefined },
    }).then(
      () => "followed",
      () => "refused",
    );
    expect(outcome).toBe("refused");
    expect(feeds.feeds).toBe(0);
  });
});
