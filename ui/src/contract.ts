/**
 * The UI side of the frontend event contract: the state a session's UI
 * stream builds, and one handler per envelope type it handles. The handled
 * set is the key set of {@link handlers}, so the list and the code cannot
 * drift apart; a gateway test checks it equals the set the projection emits.
 *
 * Pure (no DOM, no network): the app feeds it frames, tests feed it too.
 */

/** One envelope `{type, payload}` of the stream. */
export interface Envelope {
  type: string;
  payload: Record<string, unknown>;
}

/** An envelope with its cursor (the SSE id; absent on the bootstrap). */
export interface StreamItem {
  cursor?: string;
  envelope: Envelope;
}

/** A message in the chat view. */
export interface ChatEntry {
  key: string;
  role: "user" | "assistant" | "system" | "tool";
  text: string;
  taskId: string | null;
  /** The log event the message came from (where a branch can start). */
  eventId: string | null;
  /** Arrival order in the stream (orders the transcript). */
  seq: number;
  /** When it happened, as far as the stream tells (the latest state change seen). */
  at: string | null;
}

/** Terminal status of a tool call, or `running` while it has none. */
export type ToolStatus = "running" | "ok" | "timeout" | "error" | "denied" | "artifact";

/** One row of the tool timeline, keyed by task and tool call id. */
export interface ToolRow {
  key: string;
  toolCallId: string;
  taskId: string | null;
  name: string;
  status: ToolStatus;
  elapsedMs: number | null;
  resultText: string | null;
  reason: string | null;
  /** The MCP server the tool ran on (`agent.mcp_tool_use`), else null. */
  server: string | null;
  /** Arrival order in the stream (the row sits there in the transcript). */
  seq: number;
  /** When the call was seen, as far as the stream tells. */
  at: string | null;
  /** Debug tier only. */
  arguments?: unknown;
}

/** An approval request and what became of it. */
export interface Approval {
  requestId: string;
  taskId: string;
  kind: string;
  reason: string;
  toolName: string | null;
  toolCallId: string | null;
  decision: "pending" | "approved" | "denied" | "answered" | "canceled";
  /** Arrival order in the stream. */
  seq: number;
}

/** A receipt issued for the session. */
export interface ReceiptEntry {
  receiptId: string;
  taskId: string | null;
  finalState: string | null;
  chainIndex: number | null;
}

/** A turn's state. */
export interface TurnEntry {
  taskId: string;
  status: "running" | "completed" | "failed" | "canceled";
  elapsedMs: number | null;
  error: { code: string; message: string } | null;
}

/** A marker in the timeline (checkpoints, session transitions). */
export interface Marker {
  key: string;
  kind: string;
  text: string;
  /** Arrival order in the stream. */
  seq: number;
}

/** Everything the stream of one session has told the UI. */
export interface SessionView {
  session: Record<string, unknown> | null;
  status: Record<string, unknown> | null;
  chat: ChatEntry[];
  /** Text streamed by `token` envelopes, per task, until its response arrives. */
  streaming: Record<string, string>;
  thinking: Record<string, string>;
  tools: ToolRow[];
  approvals: Approval[];
  turns: TurnEntry[];
  receipts: ReceiptEntry[];
  artifacts: Record<string, unknown>[];
  markers: Marker[];
  usage: Record<string, unknown>[];
  /** Every envelope received, newest last (the debug panel). */
  log: StreamItem[];
  /** Cursors applied, in order; a repeated cursor is counted, not applied. */
  cursors: string[];
  duplicates: number;
  /** The next arrival number (see `seq` of the transcript's items). */
  seq: number;
  /** The time of the latest `session_state` (stamps what arrives after it). */
  clock: string | null;
}

/** The view before any envelope. */
export function emptyView(): SessionView {
  return {
    session: null,
    status: null,
    chat: [],
    streaming: {},
    thinking: {},
    tools: [],
    approvals: [],
    turns: [],
    receipts: [],
    artifacts: [],
    markers: [],
    usage: [],
    log: [],
    cursors: [],
    duplicates: 0,
    seq: 0,
    clock: null,
  };
}

const LOG_LIMIT = 1000;

function str(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function strOrNull(value: unknown): string | null {
  return typeof value === "string" && value !== "" ? value : null;
}

function numOrNull(value: unknown): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

/** The log event id in a cursor (`<event id>:<index>`). */
export function eventIdOf(cursor: string | undefined): string | null {
  if (!cursor) return null;
  const match = /^(.+):\d+$/.exec(cursor);
  return match ? match[1]! : cursor;
}

function toolKey(taskId: string | null, toolCallId: string): string {
  return `${taskId ?? ""}/${toolCallId}`;
}

/** A tool row as it is first seen; `seq` and `at` are stamped by {@link upsertTool}. */
type NewToolRow = Omit<ToolRow, "seq" | "at" | "server"> & { server?: string | null };

function upsertTool(view: SessionView, row: NewToolRow): SessionView {
  const index = view.tools.findIndex((t) => t.key === row.key);
  if (index < 0) {
    const stamped: ToolRow = { server: null, ...row, seq: view.seq, at: view.clock };
    return { ...view, seq: view.seq + 1, tools: [...view.tools, stamped] };
  }
  const tools = view.tools.slice();
  const known = tools[index]!;
  tools[index] = {
    ...known,
    ...row,
    name: row.name || known.name,
    server: row.server ?? known.server,
    seq: known.seq,
    at: known.at,
  };
  return { ...view, tools };
}

function addMarker(view: SessionView, marker: Omit<Marker, "seq">): SessionView {
  return {
    ...view,
    seq: view.seq + 1,
    markers: [...view.markers, { ...marker, seq: view.seq }],
  };
}

function upsertTurn(view: SessionView, turn: Partial<TurnEntry> & { taskId: string }): SessionView {
  const index = view.turns.findIndex((t) => t.taskId === turn.taskId);
  if (index < 0) {
    return {
      ...view,
      turns: [...view.turns, { status: "running", elapsedMs: null, error: null, ...turn }],
    };
  }
  const turns = view.turns.slice();
  turns[index] = { ...turns[index]!, ...turn };
  return { ...view, turns };
}

/** `record` without `key`. */
function without(record: Record<string, string>, key: string): Record<string, string> {
  const { [key]: _gone, ...rest } = record;
  return rest;
}

/**
 * Add a chat entry. An assistant response confirms the text its task streamed:
 * the streamed text it begins with is consumed (what streamed past it belongs
 * to the task's next message and keeps growing); streamed text it does not
 * match is dropped, the response being the record.
 */
function chatEntry(
  view: SessionView,
  fields: Omit<ChatEntry, "seq" | "at">,
  confirmsStreamOf: string | null,
): SessionView {
  if (view.chat.some((c) => c.key === fields.key)) return view;
  const entry: ChatEntry = { ...fields, seq: view.seq, at: view.clock };
  const next = { ...view, seq: view.seq + 1, chat: [...view.chat, entry] };
  const streamed = confirmsStreamOf === null ? undefined : view.streaming[confirmsStreamOf];
  if (confirmsStreamOf !== null && streamed !== undefined) {
    const rest = streamed.startsWith(entry.text) ? streamed.slice(entry.text.length) : "";
    next.streaming =
      rest === ""
        ? without(view.streaming, confirmsStreamOf)
        : { ...view.streaming, [confirmsStreamOf]: rest };
  }
  return next;
}

type Handler = (
  view: SessionView,
  payload: Record<string, unknown>,
  cursor?: string,
) => SessionView;

/** One handler per envelope type the UI handles. */
const handlers = {
  session: (view, p) => ({ ...view, session: p }),
  session_state: (view, p) => ({
    ...view,
    status: p,
    clock: strOrNull(p.updated_at) ?? view.clock,
  }),
  session_checkpoint: (view, p, cursor) =>
    addMarker(view, {
      key: cursor ?? `checkpoint-${view.markers.length}`,
      kind: str(p.checkpoint_type) || "checkpoint",
      text: str(p.summary_text),
    }),
  turn_start: (view, p) => upsertTurn(view, { taskId: str(p.task_id), status: "running" }),
  token: (view, p) => {
    const task = str(p.task_id);
    return {
      ...view,
      streaming: { ...view.streaming, [task]: (view.streaming[task] ?? "") + str(p.text) },
    };
  },
  response: (view, p, cursor) =>
    chatEntry(
      view,
      {
        key: str(p.message_id) || cursor || `response-${view.chat.length}`,
        role: "assistant",
        text: str(p.text),
        taskId: strOrNull(p.task_id),
        eventId: eventIdOf(cursor),
      },
      str(p.task_id),
    ),
  thinking: (view, p) => {
    const task = str(p.task_id);
    return {
      ...view,
      thinking: { ...view.thinking, [task]: (view.thinking[task] ?? "") + str(p.text) },
    };
  },
  tool_call: (view, p) => {
    const taskId = strOrNull(p.task_id);
    const toolCallId = str(p.tool_call_id);
    const key = toolKey(taskId, toolCallId);
    if (view.tools.some((t) => t.key === key)) return view;
    return upsertTool(view, {
      key,
      toolCallId,
      taskId,
      name: str(p.name),
      status: "running",
      elapsedMs: null,
      resultText: null,
      reason: null,
      server: strOrNull(p.server),
      ...("arguments" in p ? { arguments: p.arguments } : {}),
    });
  },
  tool_result: (view, p) => {
    const taskId = strOrNull(p.task_id);
    const toolCallId = str(p.tool_call_id);
    const key = toolKey(taskId, toolCallId);
    const known = view.tools.find((t) => t.key === key);
    return upsertTool(view, {
      ...(known ?? {
        key,
        toolCallId,
        taskId,
        name: str(p.tool_name),
        status: "running" as const,
        elapsedMs: null,
        reason: null,
      }),
      resultText: str(p.text),
    });
  },
  tool_outcome: (view, p) => {
    const taskId = strOrNull(p.task_id);
    const toolCallId = str(p.tool_call_id);
    const key = toolKey(taskId, toolCallId);
    const known = view.tools.find((t) => t.key === key);
    const status = str(p.status) as ToolStatus;
    return upsertTool(view, {
      ...(known ?? { key, toolCallId, taskId, resultText: null }),
      name: str(p.tool_name) || known?.name || "",
      status: ["ok", "timeout", "error", "denied", "artifact"].includes(status) ? status : "error",
      elapsedMs: numOrNull(p.elapsed_ms),
      reason: strOrNull(p.reason),
    });
  },
  approval_required: (view, p) => {
    const requestId = str(p.request_id);
    const others = view.approvals.filter(
      (a) => a.requestId !== requestId || a.decision !== "pending",
    );
    return {
      ...view,
      seq: view.seq + 1,
      approvals: [
        ...others,
        {
          requestId,
          taskId: str(p.task_id),
          kind: str(p.kind),
          reason: str(p.reason),
          toolName: strOrNull(p.tool_name),
          toolCallId: strOrNull(p.tool_call_id),
          decision: "pending",
          seq: view.seq,
        },
      ],
    };
  },
  approval_applied: (view, p) => {
    const requestId = str(p.request_id);
    const decision = str(p.decision) as Approval["decision"];
    return {
      ...view,
      approvals: view.approvals.map((a) =>
        a.requestId === requestId && a.decision === "pending" ? { ...a, decision } : a,
      ),
    };
  },
  usage: (view, p) => ({ ...view, usage: [...view.usage, p] }),
  // Compaction and its warning are timeline markers (the details are in the debug log).
  context_warning: (view, p, cursor) =>
    addMarker(view, {
      key: cursor ?? `context-warning-${view.markers.length}`,
      kind: "context_warning",
      text: `context at ${numOrNull(p.usage_percent) ?? "?"}% of ${numOrNull(p.budget_tokens) ?? "?"} tokens`,
    }),
  context_compacted: (view, p, cursor) =>
    addMarker(view, {
      key: cursor ?? `context-compacted-${view.markers.length}`,
      kind: "context_compacted",
      text: `${numOrNull(p.original_count) ?? "?"} → ${numOrNull(p.compacted_count) ?? "?"} messages, ${numOrNull(p.tokens_saved) ?? "?"} tokens saved`,
    }),
  turn_end: (view, p) => {
    const status = str(p.status);
    const taskId = str(p.task_id);
    // Text streamed by a turn that ended without a response for it (failed or
    // canceled mid-stream) is not part of the chat.
    return upsertTurn(
      { ...view, streaming: without(view.streaming, taskId) },
      {
        taskId,
        status: status === "failed" || status === "canceled" ? status : "completed",
        elapsedMs: numOrNull(p.elapsed_ms),
      },
    );
  },
  completed: (view, p) => upsertTurn(view, { taskId: str(p.task_id), status: "completed" }),
  error: (view, p) =>
    upsertTurn(view, {
      taskId: str(p.task_id),
      error: { code: str(p.code), message: str(p.message) },
    }),
  message: (view, p, cursor) => {
    const role = str(p.role);
    return chatEntry(
      view,
      {
        key: str(p.message_id) || cursor || `message-${view.chat.length}`,
        role: role === "user" || role === "tool" ? role : "system",
        text: str(p.text),
        taskId: strOrNull(p.task_id),
        eventId: eventIdOf(cursor),
      },
      null,
    );
  },
  artifact: (view, p) => ({ ...view, artifacts: [...view.artifacts, p] }),
  receipt: (view, p) => {
    const receiptId = str(p.receipt_id);
    if (view.receipts.some((r) => r.receiptId === receiptId)) return view;
    return {
      ...view,
      receipts: [
        ...view.receipts,
        {
          receiptId,
          taskId: strOrNull(p.task_id),
          finalState: strOrNull(p.final_state),
          chainIndex: numOrNull(p.chain_index),
        },
      ],
    };
  },
  // Debug tier only: shown in the debug panel (the log), nowhere else.
  raw_event: (view) => view,
} satisfies Record<string, Handler>;

/** The envelope types the UI handles. */
export type HandledEventType = keyof typeof handlers;

/** The envelope types the UI handles (must equal the types the projection emits). */
export const HANDLED_EVENT_TYPES = Object.keys(handlers) as HandledEventType[];

/** Whether the UI handles `type`. */
export function isHandled(type: string): type is HandledEventType {
  return Object.hasOwn(handlers, type);
}

/**
 * Apply one stream item. An item whose cursor was already applied is
 * counted in `duplicates` and otherwise ignored, so a reconnect that repeated
 * something could never show it twice; unknown types only reach the log.
 */
export function applyItem(view: SessionView, item: StreamItem): SessionView {
  if (item.cursor !== undefined && view.cursors.includes(item.cursor)) {
    return { ...view, duplicates: view.duplicates + 1 };
  }
  const log = [...view.log, item];
  if (log.length > LOG_LIMIT) log.splice(0, log.length - LOG_LIMIT);
  const base: SessionView = {
    ...view,
    log,
    cursors: item.cursor !== undefined ? [...view.cursors, item.cursor] : view.cursors,
  };
  const { type, payload } = item.envelope;
  if (!isHandled(type)) return base;
  return handlers[type](base, payload, item.cursor);
}
