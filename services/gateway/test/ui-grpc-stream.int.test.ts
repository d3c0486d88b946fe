// The UI event stream as a gRPC server stream (trellis.gateway.v1.UiEventService),
// against a running Trellis in both modes (embedded on PGlite; distributed
// on a real PostgreSQL and a real NATS JetStream): the same envelopes and
// cursors as the SSE route, live follow, cursor resume, typed errors.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { UiEventService, UiTier } from "@trellis/contracts/gateway";
import { harnClient } from "@trellis/gateway/testing";
import { errorDetailOf } from "@trellis/runtime";
import { bearer } from "@trellis/testkit";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { gatewayModes, type Running } from "./support/modes.js";
import { createScriptedAgent, echoAgent, readUiFrames } from "./support/ui-fixtures.js";

const modes = gatewayModes({ name: "uigrpc" });

describe.each(modes)("the UI event stream over gRPC, $mode", ({ start }) => {
  let trellis: Running;
  let api: ReturnType<typeof harnClient>;
  let client: ReturnType<typeof createClient<typeof UiEventService>>;
  let agent: string;

  beforeAll(async () => {
    trellis = await start();
    api = harnClient(trellis.url, ADMIN_KEY);
    client = createClient(
      UiEventService,
      createGrpcTransport({ baseUrl: trellis.url, interceptors: [bearer(ADMIN_KEY)] }),
    );
    agent = await createScriptedAgent(api, "echo", echoAgent());
  }, 60_000);

  afterAll(async () => {
    await trellis?.close();
  });

  it("follows a turn live, then replays it identically to the SSE stream", async () => {
    const session = await api.post("/v1/sessions", { persona_id: agent });
    const sessionId = session.json.id as string;
    const abort = new AbortController();
    const live: { cursor: string; type: string; payload: unknown }[] = [];
    const reading = (async () => {
      for await (const { envelope } of client.streamUiEvents(
        { sessionId, tier: UiTier.DEFAULT },
        { signal: abort.signal },
      )) {
        live.push({
          cursor: envelope?.cursor ?? "",
          type: envelope?.type ?? "",
          payload: envelope?.payload,
        });
        if (envelope?.type === "session_state" && live.length === 2) {
          await api.post(`/v1/sessions/${sessionId}/tasks`, { input: "over gRPC" });
        }
        if (envelope?.type === "turn_end") break;
      }
    })();
    await reading;
    abort.abort();
    expect(live[0]).toMatchObject({
      cursor: "",
      type: "session",
      payload: { session_id: sessionId, tier: "default" },
    });
    expect(live.map((e) => e.type)).toEqual(
      expect.arrayContaining(["session_state", "message", "response", "completed", "turn_end"]),
    );
    expect(live.find((e) => e.type === "response")?.payload).toMatchObject({
      text: "Echo: over gRPC",
    });

    // The SSE stream of the same session carries the same envelopes and cursors.
    const sse = await api.stream(`/v1/ui/sessions/${sessionId}/events/stream`);
    const lastCursor = live.at(-1)!.cursor;
    const frames = await readUiFrames(sse, (f) => f.id === lastCursor);
    sse.close();
    expect(live.map((e) => [e.cursor, e.type, e.payload])).toEqual(
      frames.map((f) => [f.id ?? "", f.type, f.payload]),
    );

    // Resume after a cursor, replay only up to an event.
    const k = 2;
    const resumed = [];
    const untilEvent = lastCursor.split(":")[0]!;
    for await (const { envelope } of client.streamUiEvents({
      sessionId,
      cursor: live[k]!.cursor,
      untilEventId: untilEvent,
    })) {
      resumed.push(envelope?.cursor ?? "");
    }
    // …then the rest of the until event's envelopes (turn_end is not its last), and the end.
    const expected = ["", ...live.slice(k + 1).map((e) => e.cursor)];
    expect(resumed.slice(0, expected.length)).toEqual(expected);
    for (const cursor of resumed.slice(expected.length)) {
      expect(cursor.startsWith(`${untilEvent}:`)).toBe(true);
    }
  }, 30_000);

  it("refuses bad input with typed errors before streaming", async () => {
    const session = await api.post("/v1/sessions", { persona_id: agent });
    const drain = async (request: Parameters<typeof client.streamUiEvents>[0], key = ADMIN_KEY) => {
      const c =
        key === ADMIN_KEY
          ? client
          : createClient(UiEventService, createGrpcTransport({ baseUrl: trellis.url }));
      try {
        for await (const _ of c.streamUiEvents(request)) {
          // nothing is expected
        }
      } catch (error) {
        return ConnectError.from(error);
      }
      throw new Error("the stream did not fail");
    };
    const badCursor = await drain({ sessionId: session.json.id, cursor: "evt_nope:1" });
    expect(badCursor.code).toBe(Code.InvalidArgument);
    expect(errorDetailOf(badCursor)).toMatchObject({ reason: "invalid_request", param: "cursor" });
    const noSession = await drain({ sessionId: "" });
    expect(errorDetailOf(noSession)).toMatchObject({ param: "session_id" });
    const missing = await drain({ sessionId: "ses_missing" });
    expect(missing.code).toBe(Code.NotFound);
    const anonymous = await drain({ sessionId: session.json.id }, "");
    expect(anonymous.code).toBe(Code.Unauthenticated);
  });
});
