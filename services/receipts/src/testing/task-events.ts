/**
 * Synthetic task events shaped like the tasks service's: one task from
 * submission to its end, for the receipts tests and benchmarks.
 */
import {
  create,
  fromJson,
  type JsonObject,
  type JsonValue,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import {
  ActorKind,
  type Event,
  EventSchema,
  MessageSchema,
  Role,
  TaskStatus,
  ToolResultStatus,
  Visibility,
} from "@trellis/contracts/core";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";

/** Options of {@link taskEvents}. */
export interface TaskScript {
  taskId: string;
  workspaceId?: string;
  sessionId?: string;
  agentId?: string;
  final?: "COMPLETED" | "FAILED" | "CANCELED";
  /** Add a tool call, an approval, the tool result and an artifact. */
  withTool?: boolean;
  /** Add an `agent.model_call` report. */
  withModel?: boolean;
  /** Base time (events are 1 s apart). */
  at?: Date;
  /** A started event that does not name the agent (as written before it did). */
  startedWithoutAgent?: boolean;
  /** Assign sequences 1… (unit tests that skip the outbox). */
  sequenced?: boolean;
}

const FINAL = {
  COMPLETED: [EVENT_KIND.taskCompleted, TaskStatus.COMPLETED],
  FAILED: [EVENT_KIND.taskFailed, TaskStatus.FAILED],
  CANCELED: [EVENT_KIND.taskCanceled, TaskStatus.CANCELED],
} as const;

type PayloadInit = Parameters<typeof create<typeof EventSchema>>[1] extends infer I
  ? I extends { payload?: infer P }
    ? P
    : never
  : never;

function value(json: JsonValue) {
  return fromJson(ValueSchema, json);
}

/** The payload of an event that appends `message` at `position` of the session's transcript. */
export function messageAppended(
  position: bigint,
  message: MessageInitShape<typeof MessageSchema>,
): PayloadInit {
  return {
    kind: { case: "messageAppended", value: { position, message: create(MessageSchema, message) } },
  };
}

/** The tool's answer to the call `toolCallId`: a tool message with one OK result, `output`. */
export function toolResultMessage(
  toolCallId: string,
  output: JsonValue,
): MessageInitShape<typeof MessageSchema> {
  return {
    role: Role.TOOL,
    toolCallId,
    parts: [
      {
        kind: {
          case: "toolResult",
          value: { toolCallId, status: ToolResultStatus.OK, output: value(output) },
        },
      },
    ],
  };
}

/** The events of one task from submission to its end. */
export function taskEvents(script: TaskScript): Event[] {
  const workspaceId = script.workspaceId ?? "default";
  const sessionId = script.sessionId ?? `ses_${script.taskId}`;
  const agentId = script.agentId ?? "agent_echo";
  const base = (script.at ?? new Date("2026-11-22T10:00:00Z")).getTime();
  const events: Event[] = [];
  const add = (
    kind: string,
    payload: PayloadInit,
    actor: { id: string; kind: ActorKind } = { id: agentId, kind: ActorKind.AGENT },
  ) => {
    const n = events.length + 1;
    events.push(
      create(EventSchema, {
        id: `evt_${script.taskId}_${n}`,
        kind,
        resource: { object: "task", id: script.taskId },
        workspaceId,
        sessionId,
        taskId: script.taskId,
        createdAt: timestampFromDate(new Date(base + n * 1000)),
        actor,
        ...(script.sequenced ? { sequence: BigInt(n) } : {}),
        payload,
      }),
    );
  };
  const user = { id: "user_1", kind: ActorKind.USER };
  const system = { id: "system", kind: ActorKind.SYSTEM };
  const status = (to: TaskStatus, from: TaskStatus, reason = ""): PayloadInit => ({
    kind: { case: "taskStatusChanged", value: { status: to, previousStatus: from, reason } },
  });
  const data = (json: JsonObject): PayloadInit => ({ kind: { case: "data", value: json } });

  add(EVENT_KIND.taskSubmitted, status(TaskStatus.SUBMITTED, TaskStatus.UNSPECIFIED), user);
  // As the tasks service writes it: the started event names the task's agent.
  const started = status(TaskStatus.WORKING, TaskStatus.SUBMITTED);
  if (started?.kind?.case === "taskStatusChanged" && !script.startedWithoutAgent)
    started.kind.value.agentId = agentId;
  add(EVENT_KIND.taskStarted, started, system);
  add(
    EVENT_KIND.userMessage,
    messageAppended(0n, {
      role: Role.USER,
      parts: [{ visibility: Visibility.PUBLIC, kind: { case: "text", value: { text: "hello" } } }],
    }),
    user,
  );
  if (script.withModel) {
    add(
      EVENT_KIND.modelCall,
      data({
        provider: "openai",
        model: "gpt-test",
        version: "2026-01-01",
        reason: "cheapest model within budget",
        alternatives: [{ provider: "anthropic", model: "claude-test", reason: "slower" }],
        input_tokens: 1200,
        output_tokens: 300,
        cost_usd: 0.0123,
      }),
    );
  }
  if (script.withTool) {
    add(
      EVENT_KIND.agentMessage,
      messageAppended(1n, {
        role: Role.ASSISTANT,
        toolCalls: [{ id: "call_1", name: "search", arguments: value({ q: "weather" }) }],
      }),
    );
    add(
      EVENT_KIND.taskInputRequired,
      status(TaskStatus.INPUT_REQUIRED, TaskStatus.WORKING),
      system,
    );
    add(
      EVENT_KIND.toolConfirmation,
      {
        kind: {
          case: "signalDelivered",
          value: {
            signalId: `${script.taskId}:approve`,
            payload: value({ approved: true, tool_call_id: "call_1", action: "search" }),
          },
        },
      },
      user,
    );
    add(EVENT_KIND.taskStarted, status(TaskStatus.WORKING, TaskStatus.INPUT_REQUIRED), system);
    add(EVENT_KIND.toolResult, messageAppended(2n, toolResultMessage("call_1", "sunny")));
    add(
      EVENT_KIND.artifactCreated,
      data({
        artifact_id: `art_${script.taskId}`,
        kind: "file",
        uri: `artifact://art_${script.taskId}`,
      }),
    );
  }
  const final = script.final ?? "COMPLETED";
  const [kind, to] = FINAL[final];
  add(
    kind,
    {
      kind: {
        case: "taskStatusChanged",
        value: {
          status: to,
          previousStatus: TaskStatus.WORKING,
          reason: final === "FAILED" ? "provider said: Authorization: Bearer abc.def-ghi" : "",
          ...(final === "FAILED"
            ? {
                failure: {
                  reason: "provider_unavailable",
                  domain: "adapters",
                  metadata: { api_key: "sk-secretsecretsecret" },
                },
              }
            : {}),
        },
      },
    },
    system,
  );
  return events;
}
