/**
 * Which events finish a RESUMED turn (harness-chat §8.2). Pure.
 *
 * Subscribe reads the session's event stream; for each task it feeds the
 * task's events, in order, to a {@link ResumeTracker}. A turn is "resumed"
 * once its task leaves a suspension (INPUT_REQUIRED / AUTH_REQUIRED → WORKING,
 * or straight to FAILED / CANCELED when the signal ended it). The next time the
 * task settles — terminal, or suspended again — the tracker reports it once.
 *
 * The first suspension of a turn is never reported (Send already returned it),
 * and a turn that never suspended is never reported.
 */
import { type Event, type Message, TaskStatus } from "@trellis/contracts/core";
import { isSettled, isSuspended } from "./outcome.js";

/** A resumed turn that settled. */
export interface ResumedTurnSettled {
  taskId: string;
  /** The status the task settled in (COMPLETED, FAILED, CANCELED, or suspended again). */
  status: TaskStatus;
  /** The event that settled it (the stream's cursor for this outcome). */
  eventId: string;
  /** When the suspension this turn resumed from was recorded (ms since the epoch), if known. */
  suspendedAtMs: number | undefined;
}

/** Follows one task's lifecycle events. */
export class ResumeTracker {
  private status = TaskStatus.UNSPECIFIED;
  private resumed = false;
  /** When the task last suspended (the event's time, ms). */
  private suspendedAtMs: number | undefined;

  constructor(readonly taskId: string) {}

  /** Whether the task is settled for good (nothing more to report). */
  get finished(): boolean {
    return (
      this.status === TaskStatus.COMPLETED ||
      this.status === TaskStatus.FAILED ||
      this.status === TaskStatus.CANCELED
    );
  }

  /** Whether the task waits for a signal, or runs again after one and has not settled yet. */
  get inSuspensionCycle(): boolean {
    return isSuspended(this.status) || this.resumed;
  }

  /** Feed the task's next event; returns a verdict when it settles a resumed turn. */
  observe(event: Event): ResumedTurnSettled | undefined {
    const payload = event.payload?.kind;
    if (payload?.case !== "taskStatusChanged") return undefined;
    const to = payload.value.status;
    const from =
      payload.value.previousStatus !== TaskStatus.UNSPECIFIED
        ? payload.value.previousStatus
        : this.status;
    this.status = to;
    if (to === from) return undefined; // a note (e.g. re-queued after a lost worker)
    // The signal arrived: what follows is the resumed invocation.
    if (isSuspended(from) && !isSuspended(to)) this.resumed = true;
    const suspendedAtMs = this.suspendedAtMs;
    if (isSuspended(to)) this.suspendedAtMs = millisOf(event);
    if (!this.resumed || !isSettled(to)) return undefined;
    this.resumed = false;
    return { taskId: this.taskId, status: to, eventId: event.id, suspendedAtMs };
  }
}

function millisOf(event: Event): number | undefined {
  return event.createdAt
    ? Number(event.createdAt.seconds) * 1000 + event.createdAt.nanos / 1e6
    : undefined;
}

/** The task an event is about, when it is a task's event. */
export function taskIdOf(event: Event): string | undefined {
  if (event.resource?.object === "task" && event.resource.id) return event.resource.id;
  return event.taskId || undefined;
}

/** Whether the event is the first of its task (the stream saw the task begin). */
export function beginsTask(event: Event): boolean {
  const payload = event.payload?.kind;
  return (
    payload?.case === "taskStatusChanged" &&
    payload.value.previousStatus === TaskStatus.UNSPECIFIED &&
    payload.value.status === TaskStatus.SUBMITTED
  );
}

/** What is known about the pending messages of the suspension a turn resumed from. */
export interface PendingKnowledge {
  /** Their ids, read from `Task.suspension` while the task was suspended or running again. */
  ids?: ReadonlySet<string>;
  /** Otherwise: when the suspension was recorded; pending messages were made no later. */
  suspendedAtMs?: number | undefined;
}

function createdAtMs(message: Message): number | undefined {
  return message.createdAt
    ? Number(message.createdAt.seconds) * 1000 + message.createdAt.nanos / 1e6
    : undefined;
}

function wasPending(message: Message, known: PendingKnowledge): boolean {
  if (known.ids) return message.id !== "" && known.ids.has(message.id);
  const at = createdAtMs(message);
  return known.suspendedAtMs !== undefined && at !== undefined && at <= known.suspendedAtMs;
}

/**
 * harness-chat §8.2: the post-resume turn's new messages — the task's tail
 * (`Task.output`, which the tasks service fills when the task ends: the
 * pending messages of its last suspension, then what the resumed run added)
 * without those pending messages, already surfaced as the suspended outcome's
 * `pending_messages` (§8.1). By position in the task's list, identified by id.
 */
export function postResumeMessages(tail: readonly Message[], known: PendingKnowledge): Message[] {
  return tail.filter((m) => !wasPending(m, known));
}

/**
 * The pending messages of a resumed turn that suspended again: those of the
 * new suspension that were not pending before (a task's pending list
 * accumulates over its suspensions).
 */
export function newlyPending(
  suspensionPending: readonly Message[],
  known: PendingKnowledge,
): Message[] {
  return suspensionPending.filter((m) => !wasPending(m, known));
}
