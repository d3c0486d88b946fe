/**
 * harness-chat §7: a turn's new messages are the tail of the message list past
 * the length it had before the invocation — extracted by index, never by
 * content (a node may append a message identical to an earlier one). Pure.
 *
 * In Trellis a turn is a task, and the list is the task's own messages in
 * transcript order (`Task.output`): turns of one session never interleave
 * while they run (the mailbox), but a turn resumed after a suspension may
 * continue after later turns, so the session-wide transcript is not the list
 * to index.
 */
import type { Message, TaskStatus } from "@trellis/contracts/core";

/** Everything at `preLength` and beyond, in order (harness-chat §7). */
export function tailByIndex<T>(messages: readonly T[], preLength: number): T[] {
  if (!Number.isInteger(preLength) || preLength < 0) {
    throw new RangeError(`pre-invoke length must be a non-negative integer, got ${preLength}`);
  }
  return messages.slice(preLength);
}

/**
 * The new messages of a resumed invocation (harness-chat §8.2): what the task
 * appended after the suspension it resumed from. `atSuspension` is how many
 * messages the task had appended when it suspended (its pending messages
 * included); the resumed invocation's pre-invoke length.
 */
export function resumedTail<T>(output: readonly T[], atSuspension: number): T[] {
  return tailByIndex(output, Math.min(atSuspension, output.length));
}

/** What {@link turnTail} reads of a task. */
export interface TurnMessages {
  status: TaskStatus;
  input?: { id: string } | undefined;
  output: readonly Message[];
  suspension?: { pendingMessages: readonly Message[] } | undefined;
}

/**
 * The new messages of a turn as of now — the task's messages past its input
 * (the pre-invoke length of the turn's own list is 1, the input): `Task.output`,
 * what the task appended to the transcript. While it is suspended that is the
 * messages produced before the suspension (harness-chat §8.1: the tasks service
 * appends them when the task suspends). Should the output ever begin with the
 * input itself, that is skipped by position, not by content.
 */
export function turnTail(task: TurnMessages): Message[] {
  const first = task.output[0];
  const inputId = task.input?.id ?? "";
  const startsWithInput = first !== undefined && inputId !== "" && first.id === inputId;
  return tailByIndex(task.output, startsWithInput ? 1 : 0);
}
