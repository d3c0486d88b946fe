// The session detail cache (src/ui/session-detail-cache.ts) over an
// in-process event log: read after new events it gives what a projection of
// the whole log gives, reads only what is new (counted at the log port),
// keeps a bounded number of sessions, and starts over when the log no
// longer continues what it applied (rebuilt, positions going backwards).
import {
  clone,
  create,
  fromJson,
  type JsonObject,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { timestampFromMs, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ActorKind,
  type Event,
  EventSchema,
  type Message,
  MessageSchema,
  Role,
  SessionState,
  TaskStatus,
  ToolResultStatus,
} from "@trellis/contracts/core";
import { type Session, SessionSchema } from "@trellis/contracts/tasks";
import {
  type EventFilter,
  type EventLog,
  InProcessEventLog,
  type LoggedEvent,
  type ReadQuery,
} from "@trellis/eventlog";
import { describe, expect, it } from "vitest";
import { HealthTracker, healthPolicyOf } from "../src/health/index.js";
import { projectSessionDetail, type SessionDetailProjection } from "../src/ui/session-detail.js";
import { SessionDetailCache } from "../src/ui/session-detail-cache.js";

const WORKSPACE = "ws_detail";
const T0 = Date.UTC(2026, 10, 22, 12, 0, 0);
const NOW = T0 + 3_600_000;
const policy = healthPolicyOf({ health_policy: { max_tokens: 1_000_000 } });

function sessionOf(id: string, agentId = "agent_detail", workspaceId = WORKSPACE): Session {
  return create(SessionSchema, { id, workspaceId, agentId });
}

/** Builds a session's events: each call of `turn` is one gated, approved, completed turn. */
function recorder(sessionId: string, workspaceId = WORKSPACE) {
  let n = 0;
  let turns = 0;
  const event = (kind: string, fields: MessageInitShape<typeof EventSchema>): Event => {
    n += 1;
    return create(EventSchema, {
      id: `${workspaceId === WORKSPACE ? "" : `${workspaceId}_`}${sessionId}_evt_${n}`,
      kind,
      workspaceId,
      sessionId,
      createdAt: timestampFromMs(T0 + n * 10),
      ...fields,
    });
  };
  const agent = { kind: ActorKind.AGENT, id: "agent_detail" };
  const user = { kind: ActorKind.USER, id: "usr_ops" };
  const task = (taskId: string, kind: string, status: TaskStatus) =>
    event(kind, {
      taskId,
      resource: { object: "task", id: taskId },
      payload: { kind: { case: "taskStatusChanged", value: { status, previousStatus: 0 } } },
    });
  const message = (taskId: string, kind: string, message: Message, actor = agent) =>
    event(kind, {
      taskId,
      actor,
      resource: { object: "task", id: taskId },
      payload: {
        kind: { case: "messageAppended", value: { message, position: BigInt(n) } },
      },
    });
  const data = (taskId: string, kind: string, value: JsonObject) =>
    event(kind, {
      taskId,
      actor: agent,
      resource: { object: "task", id: taskId },
      payload: { kind: { case: "data", value } },
    });
  const text = (role: Role, value: string) =>
    create(MessageSchema, {
      id: `msg_${n}`,
      role,
      parts: [{ kind: { case: "text", value: { text: value } } }],
    });
  const toolResult = (callId: string, output: string) =>
    create(MessageSchema, {
      id: `msg_${n}`,
      role: Role.TOOL,
      toolCallId: callId,
      parts: [
        {
          kind: {
            case: "toolResult",
            value: {
              toolCallId: callId,
              status: ToolResultStatus.OK,
              output: create(ValueSchema, { kind: { case: "stringValue", value: output } }),
            },
          },
        },
      ],
    });
  return {
    opened: () =>
      event("session.created", {
        resource: { object: "session", id: sessionId },
        payload: {
          kind: {
            case: "sessionStateChanged",
            value: { state: SessionState.ACTIVE, previousState: 0, reason: "created" },
          },
        },
      }),
    turn(): Event[] {
      turns += 1;
      const id = `${sessionId}_task_${turns}`;
      const call = `call_${turns}`;
      return [
        task(id, "task.submitted", TaskStatus.SUBMITTED),
        message(id, "user.message", text(Role.USER, `question ${turns}`), user),
        task(id, "task.started", TaskStatus.WORKING),
        data(id, "agent.model_call", { input_tokens: 30, output_tokens: 10 }),
        data(id, "agent.tool_use", { tool_call_id: `${call}_s`, name: "search", input: {} }),
        message(id, "agent.tool_result", toolResult(`${call}_s`, `found ${turns}`)),
        message(
          id,
          "agent.message",
          create(MessageSchema, {
            id: `msg_gate_${turns}`,
            role: Role.ASSISTANT,
            toolCalls: [{ id: `${call}_w`, name: "write_file" }],
          }),
        ),
        task(id, "task.input_required", TaskStatus.INPUT_REQUIRED),
        event("user.tool_confirmation", {
          taskId: id,
          actor: user,
          resource: { object: "task", id },
          payload: {
            kind: {
              case: "signalDelivered",
              value: {
                signalId: `${id}:approval`,
                payload: fromJson(ValueSchema, { approved: true }),
              },
            },
          },
        }),
        task(id, "task.started", TaskStatus.WORKING),
        message(id, "agent.tool_result", toolResult(`${call}_w`, "written")),
        message(id, "agent.message", text(Role.ASSISTANT, `answer ${turns}`)),
        task(id, "task.completed", TaskStatus.COMPLETED),
      ];
    },
  };
}

/** An event log port that counts what is read through it and whose log can be swapped. */
class CountingLog implements EventLog {
  reads = 0;
  eventsRead = 0;
  lasts = 0;
  inner: EventLog;

  constructor(inner: EventLog) {
    this.inner = inner;
  }

  reset(): void {
    this.reads = 0;
    this.eventsRead = 0;
    this.lasts = 0;
  }
  append(events: readonly Event[]) {
    return this.inner.append(events);
  }
  async read(query: ReadQuery): Promise<LoggedEvent[]> {
    this.reads += 1;
    const found = await this.inner.read(query);
    this.eventsRead += found.length;
    return found;
  }
  subscribe(query: Parameters<EventLog["subscribe"]>[0]) {
    return this.inner.subscribe(query);
  }
  last(filter: EventFilter) {
    this.lasts += 1;
    return this.inner.last(filter);
  }
  consume(options: Parameters<EventLog["consume"]>[0]) {
    return this.inner.consume(options);
  }
  ping() {
    return this.inner.ping();
  }
  close() {
    return this.inner.close();
  }
}

interface Detail {
  projection: SessionDetailProjection;
  health: JsonObject;
}

function cachedDetail(cache: SessionDetailCache, session: Session, envelopes: number) {
  return cache.read(
    session,
    envelopes,
    ({ detail, health }): Detail => ({
      projection: detail.projection(envelopes),
      health: health.snapshot(NOW, policy).snapshot,
    }),
  );
}

/** The detail projected from scratch from the session's whole log as stored (not counted). */
async function fullDetail(log: CountingLog, session: Session, envelopes: number): Promise<Detail> {
  const stored = await log.inner.read({
    filter: { workspaceId: session.workspaceId, sessionId: session.id },
    limit: 10_000,
  });
  const events = stored.map((e) => e.event);
  const tracker = new HealthTracker(session.id);
  for (const event of events) tracker.apply(event);
  return {
    projection: projectSessionDetail(session, events, envelopes),
    health: tracker.snapshot(NOW, policy).snapshot,
  };
}

async function logOf(
  count: number,
  sessionId: string,
): Promise<{ log: CountingLog; events: Event[] }> {
  const r = recorder(sessionId);
  const events = [r.opened()];
  while (events.length < count) events.push(...r.turn());
  const log = new CountingLog(new InProcessEventLog());
  await log.append(events);
  return { log, events };
}

describe("session detail cache", () => {
  it("keeps two workspaces' sessions of one id apart", async () => {
    const mine = sessionOf("ses_shared");
    const theirs = sessionOf("ses_shared", "agent_detail", "ws_other");
    const a = recorder(mine.id);
    const b = recorder(theirs.id, theirs.workspaceId);
    const log = new CountingLog(new InProcessEventLog());
    const cache = new SessionDetailCache({ eventLog: log });
    await log.append([a.opened(), ...a.turn(), ...a.turn(), b.opened(), ...b.turn()]);
    const first = await cachedDetail(cache, mine, 100);
    expect(first).toEqual(await fullDetail(log, mine, 100));
    expect(first.health.metrics).toMatchObject({ total_tokens: 2 * 40 });
    // The other workspace's session is its own entry, projected from its own log.
    const other = await cachedDetail(cache, theirs, 100);
    expect(other).toEqual(await fullDetail(log, theirs, 100));
    expect(other.health.metrics).toMatchObject({ total_tokens: 40 });
    expect(cache.size).toBe(2);
    await log.append(b.turn());
    expect(await cachedDetail(cache, mine, 100)).toEqual(first);
    expect((await cachedDetail(cache, theirs, 100)).health.metrics).toMatchObject({
      total_tokens: 2 * 40,
    });
  });

  it("gives after each append what a projection of the whole log gives", async () => {
    const session = sessionOf("ses_same");
    const r = recorder(session.id);
    const log = new CountingLog(new InProcessEventLog());
    // Small pages: reads cross page boundaries.
    const cache = new SessionDetailCache({ eventLog: log, pageSize: 7 });
    await log.append([r.opened()]);
    for (let turn = 1; turn <= 6; turn++) {
      await log.append(r.turn());
      for (const envelopes of [0, 5, 40, 100]) {
        const incremental = await cachedDetail(cache, session, envelopes);
        expect(incremental).toEqual(await fullDetail(log, session, envelopes));
      }
    }
    const last = await cachedDetail(cache, session, 100);
    // The log was projected for real: every turn left its resume points and routes.
    expect(last.projection.resumePoints.map((p) => p.kind)).toEqual(
      Array.from({ length: 6 }, () => [
        "approval_request",
        "approval_resolution",
        "turn_completed",
      ]).flat(),
    );
    expect(last.projection.channel.participants).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: "operator:usr_ops" }),
        expect.objectContaining({ id: "tool:write_file" }),
      ]),
    );
    expect(last.projection.channel.truncated).toBe(false);
    expect(last.health.metrics).toMatchObject({ total_tokens: 6 * 40 });

    // A wider window than the one kept is read again from the start, and still the same.
    log.reset();
    expect(await cachedDetail(cache, session, 1000)).toEqual(await fullDetail(log, session, 1000));
    expect(log.eventsRead).toBe(1 + 6 * 13);
  });

  it("reads the whole log in pages of 1,000 once, then only the events after the last read", async () => {
    const session = sessionOf("ses_long");
    const r = recorder(session.id);
    const log = new CountingLog(new InProcessEventLog());
    const events = [r.opened()];
    while (events.length < 2_500) events.push(...r.turn());
    await log.append(events);
    const cache = new SessionDetailCache({ eventLog: log });

    await cachedDetail(cache, session, 100);
    expect(log.eventsRead).toBe(events.length);
    expect(log.reads).toBe(Math.ceil(events.length / 1000));

    log.reset();
    const turn = r.turn();
    await log.append(turn);
    const after = await cachedDetail(cache, session, 100);
    expect(log.eventsRead).toBe(turn.length);
    expect(log.reads).toBe(1);
    expect(after).toEqual(await fullDetail(log, session, 100));
    expect(after.projection.channel.truncated).toBe(true);

    // Nothing new: the log's latest event is asked for, nothing is read.
    log.reset();
    expect(await cachedDetail(cache, session, 100)).toEqual(after);
    expect(log.reads).toBe(0);
    expect(log.lasts).toBe(1);
  });

  it("lets concurrent reads of one session take turns, each event read once", async () => {
    const session = sessionOf("ses_concurrent");
    const r = recorder(session.id);
    const log = new CountingLog(new InProcessEventLog());
    await log.append([r.opened(), ...r.turn()]);
    const cache = new SessionDetailCache({ eventLog: log });
    await cachedDetail(cache, session, 100);
    log.reset();
    const turn = r.turn();
    await log.append(turn);
    const [a, b] = await Promise.all([
      cachedDetail(cache, session, 100),
      cachedDetail(cache, session, 5),
    ]);
    expect(a).toEqual(await fullDetail(log, session, 100));
    expect(b).toEqual(await fullDetail(log, session, 5));
    expect(log.eventsRead).toBe(turn.length);
  });

  it("keeps a bounded number of sessions, dropping the least recently read", async () => {
    const log = new CountingLog(new InProcessEventLog());
    const sessions = ["ses_a", "ses_b", "ses_c"].map((id) => sessionOf(id));
    const sizes = new Map<string, number>();
    for (const session of sessions) {
      const r = recorder(session.id);
      const events = [r.opened(), ...r.turn()];
      await log.append(events);
      sizes.set(session.id, events.length);
    }
    const [a, b, c] = sessions as [Session, Session, Session];
    const cache = new SessionDetailCache({ eventLog: log, maxSessions: 2 });
    await cachedDetail(cache, a, 100);
    await cachedDetail(cache, b, 100);
    // Reading `a` again makes `b` the least recently read.
    await cachedDetail(cache, a, 100);
    await cachedDetail(cache, c, 100);
    expect(cache.size).toBe(2);

    log.reset();
    await cachedDetail(cache, a, 100);
    await cachedDetail(cache, c, 100);
    // Both kept: nothing read again.
    expect(log.eventsRead).toBe(0);
    expect(cache.size).toBe(2);

    log.reset();
    expect(await cachedDetail(cache, b, 100)).toEqual(await fullDetail(log, b, 100));
    // Dropped: its whole log is read again.
    expect(log.eventsRead).toBe(sizes.get(b.id));
    expect(cache.size).toBe(2);
  });

  it("starts over when the log's positions go backwards", async () => {
    const session = sessionOf("ses_backwards");
    const { log, events } = await logOf(60, session.id);
    const cache = new SessionDetailCache({ eventLog: log });
    await cachedDetail(cache, session, 100);

    // Rebuilt shorter: its latest event is before the position kept.
    log.inner = new InProcessEventLog({ history: events.slice(0, 20) });
    expect(await cachedDetail(cache, session, 100)).toEqual(await fullDetail(log, session, 100));
    // Rebuilt with other events at the position kept.
    const other = recorder(session.id);
    const replaced = [other.opened(), ...other.turn(), ...other.turn()];
    const changed = clone(EventSchema, replaced[19] as Event);
    changed.id = "evt_other";
    replaced[19] = changed;
    log.inner = new InProcessEventLog({ history: replaced.slice(0, 20) });
    const detail = await cachedDetail(cache, session, 100);
    expect(detail).toEqual(await fullDetail(log, session, 100));
    expect((detail.projection.channel.envelopes as JsonObject[]).at(-1)?.id).toBe("evt_other");
    // Emptied.
    log.inner = new InProcessEventLog();
    expect(await cachedDetail(cache, session, 100)).toEqual(await fullDetail(log, session, 100));
  });

  it("starts over when the log was rebuilt with the same events at later positions", async () => {
    const session = sessionOf("ses_moved");
    const { log } = await logOf(40, session.id);
    const cache = new SessionDetailCache({ eventLog: log });
    await cachedDetail(cache, session, 100);
    const stored = await log.read({
      filter: { workspaceId: WORKSPACE, sessionId: session.id },
      limit: 10_000,
    });
    const r = recorder("ses_more");
    const more = r.turn().map((e) => create(EventSchema, { ...e, sessionId: session.id }));
    const rebuilt = new InProcessEventLog({
      history: stored.map(({ event, position }) => ({ event, position: position + 1_000n })),
    });
    await rebuilt.append(more);
    log.inner = rebuilt;
    const detail = await cachedDetail(cache, session, 100);
    expect(detail).toEqual(await fullDetail(log, session, 100));
    // Not applied twice: one set of resume points per turn.
    expect(detail.projection.resumePoints.filter((p) => p.kind === "turn_completed")).toHaveLength(
      stored.filter((e) => e.event.kind === "task.completed").length + 1,
    );
  });

  it("starts over for a session whose agent changed", async () => {
    const session = sessionOf("ses_agent");
    const { log } = await logOf(30, session.id);
    const cache = new SessionDetailCache({ eventLog: log });
    await cachedDetail(cache, session, 100);
    const moved = sessionOf(session.id, "agent_other");
    const detail = await cachedDetail(cache, moved, 100);
    expect(detail).toEqual(await fullDetail(log, moved, 100));
    expect(detail.projection.channel.participants).toContainEqual(
      expect.objectContaining({ id: "agent:agent_other" }),
    );
  });
});
