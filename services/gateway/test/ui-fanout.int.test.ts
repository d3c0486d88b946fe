// The UI stream's shared per-session feed (src/ui/fanout.ts) against an
// embedded Trellis: many subscribers of one session, joining before and
// during a turn, each get the session's envelopes exactly once, in order,
// byte-identical to a replay from the log; the feed stops with its last
// subscriber and a new one starts cleanly.

import { harnClient } from "@trellis/gateway/testing";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN_KEY } from "./support/conformance.js";
import { startGatewayWithTasks } from "./support/embedded.js";
import {
  createScriptedAgent,
  gatedToolAgent,
  readUiFrames,
  type UiStreamFrame,
} from "./support/ui-fixtures.js";

describe("the UI stream's shared feed", () => {
  let trellis: EmbeddedTrellis;
  let api: ReturnType<typeof harnClient>;
  let agent: string;

  beforeAll(async () => {
    trellis = await startGatewayWithTasks(ADMIN_KEY);
    api = harnClient(trellis.address.url, ADMIN_KEY);
    agent = await createScriptedAgent(api, "gated", gatedToolAgent(300));
  }, 60_000);

  afterAll(async () => {
    await trellis?.close({ graceMs: 500 });
  });

  const path = (id: string) => `/v1/ui/sessions/${id}/events/stream`;
  const rows = (frames: UiStreamFrame[]) => frames.map((f) => [f.id, f.type, f.data]);

  it("gives every subscriber the same frames once, however it joined", async () => {
    const session = await api.post("/v1/sessions", { persona_id: agent });
    const id = session.json.id as string;
    // Ten subscribers before the turn…
    const early = await Promise.all(Array.from({ length: 10 }, () => api.stream(path(id))));
    const earlyHead = await Promise.all(
      early.map((s) => readUiFrames(s, (f) => f.type === "session_state")),
    );
    await api.post(`/v1/sessions/${id}/tasks`, { input: "Oslo" });
    // …and ten more while it runs (the first waits for approval).
    const waiting = await Promise.all(
      early.map((s) => readUiFrames(s, (f) => f.type === "approval_required")),
    );
    const late = await Promise.all(Array.from({ length: 10 }, () => api.stream(path(id))));
    const lateHead = await Promise.all(
      late.map((s) => readUiFrames(s, (f) => f.type === "approval_required")),
    );
    const request = waiting[0]!.at(-1)!.payload.request_id as string;
    await api.post(`/v1/tasks/${request}/messages`, {
      kind: "tool_confirmation",
      message: { role: "user", parts: [{ type: "json", value: { approved: false } }] },
    });
    const all = [...early, ...late];
    const rest = await Promise.all(all.map((s) => readUiFrames(s, (f) => f.type === "turn_end")));
    for (const s of all) s.close();
    const seen = all.map((_, i) => [
      ...(i < 10 ? [...earlyHead[i]!, ...waiting[i]!] : lateHead[i - 10]!),
      ...rest[i]!,
    ]);
    // Everyone saw the same frames (ids, types, bytes), each once.
    for (const frames of seen) {
      expect(rows(frames)).toEqual(rows(seen[0]!));
      const ids = frames.flatMap((f) => (f.id ? [f.id] : []));
      expect(new Set(ids).size).toBe(ids.length);
    }
    // And a replay from the log afterwards is identical.
    const replay = await api.stream(path(id));
    const lastId = seen[0]!.at(-1)!.id;
    const replayed = await readUiFrames(replay, (f) => f.id === lastId);
    replay.close();
    expect(rows(replayed.slice(0, seen[0]!.length))).toEqual(rows(seen[0]!));
    expect(seen[0]!.map((f) => f.type)).toContain("approval_applied");
  }, 60_000);

  it("starts a fresh feed after the last subscriber left", async () => {
    const session = await api.post("/v1/sessions", { persona_id: agent });
    const id = session.json.id as string;
    const first = await api.stream(path(id));
    await readUiFrames(first, (f) => f.type === "session_state");
    first.close();
    // Give the server a moment to see the close and stop the feed.
    await new Promise((r) => setTimeout(r, 200));
    const second = await api.stream(path(id));
    await readUiFrames(second, (f) => f.type === "session_state");
    await api.post(`/v1/sessions/${id}/tasks`, { input: "Rome" });
    const frames = await readUiFrames(second, (f) => f.type === "approval_required");
    second.close();
    expect(frames.map((f) => f.type)).toContain("tool_call");
  }, 30_000);
});
