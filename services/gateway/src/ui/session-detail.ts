/**
 * The log-derived parts of session detail (`GET /v1/ui/sessions/{id}`, spec
 * `003`, "Session Detail And Resume Contract"): the resume points and the
 * channel projection. Like the UI stream, both are a projection of the
 * session's event log through {@link UiProjector}, never a second source of
 * truth: the same log always gives the same output.
 *
 * Resume points, in log order, one per event:
 *
 * | envelope (log event) | `kind` |
 * |---|---|
 * | `session_checkpoint` (`session.thread_forked`: the branch's seed) | `checkpoint` (`checkpoint_type: resume_seed`) |
 * | `context_compacted` (`context.compacted`) | `checkpoint` (`checkpoint_type: context_compacted`) |
 * | `approval_required` (`task.input_required` / `auth_required`: the suspended turn's checkpoint) | `approval_request` |
 * | `approval_applied` (the signal that answered it) | `approval_resolution` |
 * | `completed` (`task.completed`) | `turn_completed` |
 *
 * Every `resume_cursor` is the event's id, which `POST /v1/sessions/{id}/fork`
 * takes as `at_event_id` or `at_cursor`: the branch starts with the
 * transcript as it was at that event.
 *
 * Channel participants are stable ids: `runtime`, `agent:<id>` (the session's
 * agent first, then any other agent that acted), `operator:<actor id>` (the
 * users whose events are in the log; `operator` when an approval must route
 * to an operator and none acted yet) and `tool:<name>` (tools called).
 * Senders come from the event's actor (user → operator, agent → agent,
 * anything else → runtime) except tool results, sent by their tool.
 * Recipients: a tool call goes to its tools; an approval request to the
 * operators, its resolution from the operator to the agent; other agent
 * output to the operators (the runtime when none acted); everything else to
 * the session's agent.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { ActorKind, type Event } from "@trellis/contracts/core";
import type { Session } from "@trellis/contracts/tasks";
import { eventPayloadJson, timestampJson } from "../domain/harn-json.js";
import { projectorFor } from "./frames.js";
import type { ProjectedEnvelope, UiProjector } from "./projection/index.js";

/** Envelopes of the channel projection when the client does not say (`?envelopes=`). */
export const DEFAULT_CHANNEL_ENVELOPES = 100;
/** Most envelopes one detail response carries. */
export const MAX_CHANNEL_ENVELOPES = 1000;

// Longest `summary` of a resume point or envelope.
const SUMMARY_CHARS = 160;

/** Kinds of resume point. */
export type ResumePointKind =
  | "checkpoint"
  | "approval_request"
  | "approval_resolution"
  | "turn_completed";

/** Participant ids that are not per actor. */
export const RUNTIME_PARTICIPANT = "runtime";
export const OPERATOR_PARTICIPANT = "operator";

/** The log-derived sections of session detail. */
export interface SessionDetailProjection {
  resumePoints: JsonObject[];
  channel: JsonObject;
}

function clip(text: string): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > SUMMARY_CHARS ? `${flat.slice(0, SUMMARY_CHARS - 1)}…` : flat;
}

function str(payload: JsonObject, name: string): string {
  const value = payload[name];
  return typeof value === "string" ? value : "";
}

/** A one-line description of what an event projected to (empty: nothing to say). */
function summaryOf(envelopes: readonly ProjectedEnvelope[]): string {
  const parts: string[] = [];
  for (const { type, payload } of envelopes) {
    switch (type) {
      case "response":
      case "message":
        if (str(payload, "text") !== "") parts.push(str(payload, "text"));
        break;
      case "tool_call":
        parts.push(`calls ${str(payload, "name") || "a tool"}`);
        break;
      case "tool_outcome":
        parts.push(`${str(payload, "tool_name") || "tool"}: ${str(payload, "status")}`);
        break;
      case "approval_required":
        parts.push(
          str(payload, "tool_name")
            ? `approval required to run ${str(payload, "tool_name")}`
            : `${str(payload, "kind")} required`,
        );
        break;
      case "approval_applied":
        parts.push(`approval: ${str(payload, "decision")}`);
        break;
      case "completed":
        parts.push("turn completed");
        break;
      case "error":
        parts.push(
          `turn ${str(payload, "code")}${str(payload, "message") ? `: ${str(payload, "message")}` : ""}`,
        );
        break;
      case "context_compacted":
        parts.push(
          `context compacted${str(payload, "summary") ? `: ${str(payload, "summary")}` : ""}`,
        );
        break;
      case "context_warning":
        parts.push(str(payload, "message") || "context warning");
        break;
      case "session_checkpoint":
        parts.push(`branch seeded from ${str(payload, "parent_session_id") || "its parent"}`);
        break;
      case "artifact":
        parts.push(`artifact ${str(payload, "name") || str(payload, "artifact_id")}`);
        break;
      case "receipt":
        parts.push(`receipt ${str(payload, "receipt_id")}`);
        break;
      case "session_state": {
        const transition = str(payload, "transition");
        parts.push(`session ${transition || str(payload, "status")}`);
        break;
      }
      default:
        break;
    }
  }
  return clip([...new Set(parts)].join("; "));
}

/** The resume point `envelopes` of `event` make, if any. */
function resumePointOf(
  event: Event,
  envelopes: readonly ProjectedEnvelope[],
  lastResponse: ReadonlyMap<string, string>,
): JsonObject | undefined {
  const base = (kind: ResumePointKind, summary: string, extra: JsonObject = {}): JsonObject => ({
    kind,
    ...extra,
    event_id: event.id,
    resume_cursor: event.id,
    task_id: event.taskId || null,
    created_at: timestampJson(event.createdAt),
    summary: clip(summary),
  });
  for (const { type, payload } of envelopes) {
    switch (type) {
      case "session_checkpoint":
        return base("checkpoint", summaryOf([{ type, payload }]), {
          checkpoint_type: str(payload, "checkpoint_type") || "resume_seed",
        });
      case "context_compacted":
        return base("checkpoint", summaryOf([{ type, payload }]), {
          checkpoint_type: "context_compacted",
        });
      case "approval_required":
        return base("approval_request", summaryOf([{ type, payload }]), {
          approval_kind: str(payload, "kind"),
          tool_name: str(payload, "tool_name") || null,
        });
      case "approval_applied":
        return base("approval_resolution", summaryOf([{ type, payload }]), {
          decision: str(payload, "decision"),
        });
      case "completed": {
        const reply = lastResponse.get(event.taskId) ?? "";
        return base("turn_completed", reply === "" ? "turn completed" : `turn completed: ${reply}`);
      }
      default:
        break;
    }
  }
  return undefined;
}

/** Who sends and receives one event on the session channel. */
class ChannelRouter {
  readonly #agent: string;
  // Insertion order = first appearance: the participant list is stable.
  readonly #participants = new Map<string, JsonObject>();
  readonly #operators: string[] = [];

  constructor(session: Session) {
    this.#agent = `agent:${session.agentId || "default"}`;
    this.#add(RUNTIME_PARTICIPANT, "runtime", "Trellis runtime");
    this.#add(this.#agent, "agent", session.agentId || "default");
  }

  participants(): JsonObject[] {
    return [...this.#participants.values()];
  }

  route(
    event: Event,
    envelopes: readonly ProjectedEnvelope[],
  ): { sender: string; recipients: string[] } {
    const actor = event.actor;
    let sender: string;
    if (actor?.kind === ActorKind.USER) {
      sender = this.#operator(actor.id);
    } else if (actor?.kind === ActorKind.AGENT && actor.id !== "") {
      sender = `agent:${actor.id}`;
      this.#add(sender, "agent", actor.id);
    } else {
      sender = RUNTIME_PARTICIPANT;
    }
    const tools = new Set<string>();
    let toolSender: string | undefined;
    let approval = false;
    for (const { type, payload } of envelopes) {
      if (type === "tool_call") tools.add(this.#tool(str(payload, "name")));
      if (type === "tool_result" || type === "tool_outcome") {
        toolSender ??= this.#tool(str(payload, "tool_name"));
      }
      if (type === "approval_required") approval = true;
    }
    if (approval) return { sender, recipients: this.#operatorsOrDefault() };
    if (tools.size > 0) return { sender, recipients: [...tools] };
    // A tool's result goes back to the agent (a denial is the operator's own act).
    if (toolSender !== undefined && !this.#operators.includes(sender)) {
      return {
        sender: toolSender,
        recipients: [sender.startsWith("agent:") ? sender : this.#agent],
      };
    }
    if (sender.startsWith("agent:")) {
      return {
        sender,
        recipients: this.#operators.length > 0 ? [...this.#operators] : [RUNTIME_PARTICIPANT],
      };
    }
    return { sender, recipients: [this.#agent] };
  }

  #operator(actorId: string): string {
    const id = actorId === "" ? OPERATOR_PARTICIPANT : `operator:${actorId}`;
    if (!this.#participants.has(id)) {
      this.#operators.push(id);
      this.#add(id, "operator", actorId || "operator");
    }
    return id;
  }

  #operatorsOrDefault(): string[] {
    return this.#operators.length > 0 ? [...this.#operators] : [this.#operator("")];
  }

  #tool(name: string): string {
    const id = `tool:${name || "unknown"}`;
    this.#add(id, "tool", name || "unknown");
    return id;
  }

  #add(id: string, kind: string, name: string): void {
    if (!this.#participants.has(id)) this.#participants.set(id, { id, kind, name });
  }
}

/** One channel envelope, kept raw: rendered only when it is in a response's window. */
interface ChannelEntry {
  event: Event;
  sender: string;
  recipients: string[];
  summary: string;
}

/**
 * Session detail as a fold over the log: {@link apply} the session's events
 * in log order, read the sections with {@link projection} at any point. Fed
 * the same events, it gives the same output whether they came in one read or
 * in many, so a gateway can keep one per session and apply only what is new.
 *
 * It keeps every resume point, the channel's participants and the last
 * {@link window} events (the most envelopes a projection can carry).
 */
export class SessionDetailProjector {
  /** The most channel envelopes {@link projection} can give. */
  readonly window: number;
  readonly #session: Session;
  readonly #projector: UiProjector;
  readonly #router: ChannelRouter;
  // The latest reply text per task (a completed turn's summary).
  readonly #lastResponse = new Map<string, string>();
  readonly #resumePoints: JsonObject[] = [];
  // A ring of the last `window` events: `#next` is where the oldest stands once full.
  readonly #recent: ChannelEntry[] = [];
  #next = 0;
  #events = 0;

  constructor(session: Session, window: number = MAX_CHANNEL_ENVELOPES) {
    this.window = window;
    this.#session = session;
    this.#projector = projectorFor(session);
    this.#router = new ChannelRouter(session);
  }

  /** Apply the session's next event (log order). */
  apply(event: Event): void {
    this.#events += 1;
    const projected = this.#projector.project(event);
    for (const { type, payload } of projected) {
      if (type === "response" && str(payload, "text") !== "") {
        this.#lastResponse.set(event.taskId, str(payload, "text"));
      }
    }
    const point = resumePointOf(event, projected, this.#lastResponse);
    if (point) this.#resumePoints.push(point);
    // Routed for every event, so participants are the same whatever the window.
    const { sender, recipients } = this.#router.route(event, projected);
    if (this.window === 0) return;
    const entry = { event, sender, recipients, summary: summaryOf(projected) || event.kind };
    if (this.#recent.length < this.window) {
      this.#recent.push(entry);
    } else {
      this.#recent[this.#next] = entry;
      this.#next = (this.#next + 1) % this.window;
    }
  }

  /** The sections so far, with the channel's last `envelopes` events (at most {@link window}). */
  projection(envelopes: number): SessionDetailProjection {
    if (envelopes > this.window) {
      throw new RangeError(`asked for ${envelopes} envelopes, keeps ${this.window}`);
    }
    const inOrder = [...this.#recent.slice(this.#next), ...this.#recent.slice(0, this.#next)];
    const kept = envelopes === 0 ? [] : inOrder.slice(-envelopes);
    return {
      resumePoints: [...this.#resumePoints],
      channel: {
        channel_id: `session:${this.#session.id}`,
        participants: this.#router.participants(),
        envelopes: kept.map(({ event, sender, recipients, summary }) => ({
          id: event.id,
          sender_id: sender,
          recipient_ids: recipients,
          event_type: event.kind,
          summary,
          payload: eventPayloadJson(event),
          created_at: timestampJson(event.createdAt),
        })),
        truncated: this.#events > envelopes,
      },
    };
  }
}

/**
 * Project a session's whole log (in log order) into its resume points and
 * its channel, keeping the channel's last `envelopes` events.
 */
export function projectSessionDetail(
  session: Session,
  events: readonly Event[],
  envelopes: number,
): SessionDetailProjection {
  const projector = new SessionDetailProjector(session, envelopes);
  for (const event of events) projector.apply(event);
  return projector.projection(envelopes);
}
