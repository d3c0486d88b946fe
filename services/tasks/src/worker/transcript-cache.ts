/**
 * The transcripts of recently run sessions, kept so a turn's history is not
 * read (and decoded) from the database in full every turn. Only what was
 * appended since the last turn is read.
 *
 * Sound because transcript messages never change in place: they are only
 * appended, or dropped by a truncate, which bumps the session's transcript
 * epoch (a cached copy of another epoch is thrown away).
 */
import type { Message } from "@trellis/contracts/core";

interface Entry {
  epoch: bigint;
  messages: Message[];
}

/** A session: its workspace and id (session ids are unique per workspace). */
export interface TranscriptSession {
  workspaceId: string;
  sessionId: string;
}

/** Reads transcript positions `from` ≤ p < `to` of `session`. */
export type TranscriptReader = (
  session: TranscriptSession,
  from: bigint,
  to: bigint,
) => Promise<Message[]>;

function keyOf(session: TranscriptSession): string {
  return JSON.stringify([session.workspaceId, session.sessionId]);
}

/**
 * An LRU cache of session transcripts (prefixes of them), bounded by
 * sessions and by messages in all: a long session must not keep its whole
 * transcript in memory for good (the least recently run sessions go first;
 * a transcript longer than the whole budget is read from the database each
 * turn instead of cached).
 */
export class TranscriptCache {
  /** By workspace and session id ({@link keyOf}). */
  readonly #entries = new Map<string, Entry>();
  readonly #maxSessions: number;
  readonly #maxMessages: number;
  /** Messages held by all entries. */
  #messages = 0;

  constructor(maxSessions = 256, maxMessages = 50_000) {
    this.#maxSessions = maxSessions;
    this.#maxMessages = maxMessages;
  }

  /** Messages held now (all sessions). */
  get size(): number {
    return this.#messages;
  }

  /** The transcript before `position` in transcript epoch `epoch`. */
  async history(
    read: TranscriptReader,
    session: TranscriptSession,
    epoch: bigint,
    position: bigint,
  ): Promise<readonly Message[]> {
    const sessionId = keyOf(session);
    let entry = this.#entries.get(sessionId);
    if (!entry || entry.epoch !== epoch || BigInt(entry.messages.length) > position) {
      this.#drop(sessionId);
      entry = { epoch, messages: [] };
    }
    const have = BigInt(entry.messages.length);
    if (have < position) {
      const more = await read(session, have, position);
      if (BigInt(more.length) !== position - have) {
        // The transcript is not what the claim said (cut meanwhile): do not cache it.
        this.#drop(sessionId);
        return [...entry.messages, ...more];
      }
      // The entry may have been replaced or dropped while reading: it is
      // re-entered below with its new length.
      this.#drop(sessionId);
      entry.messages.push(...more);
    }
    const messages =
      BigInt(entry.messages.length) === position
        ? entry.messages.slice()
        : entry.messages.slice(0, Number(position));
    this.#keep(sessionId, entry);
    return messages;
  }

  /** Record messages appended at `start` (kept only when they continue the cached prefix). */
  extend(
    session: TranscriptSession,
    epoch: bigint,
    start: bigint,
    messages: readonly Message[],
  ): void {
    const sessionId = keyOf(session);
    const entry = this.#entries.get(sessionId);
    if (!entry) return;
    this.#drop(sessionId);
    if (entry.epoch !== epoch || BigInt(entry.messages.length) !== start) return;
    entry.messages.push(...messages);
    this.#keep(sessionId, entry);
  }

  #drop(sessionId: string): void {
    const entry = this.#entries.get(sessionId);
    if (!entry) return;
    this.#entries.delete(sessionId);
    this.#messages -= entry.messages.length;
  }

  /** Enter `entry` as the most recently used, then evict down to the budgets. */
  #keep(sessionId: string, entry: Entry): void {
    this.#drop(sessionId);
    if (entry.messages.length > this.#maxMessages) return;
    this.#entries.set(sessionId, entry);
    this.#messages += entry.messages.length;
    while (this.#entries.size > this.#maxSessions || this.#messages > this.#maxMessages) {
      const oldest = this.#entries.keys().next().value;
      if (oldest === undefined) return;
      this.#drop(oldest);
    }
  }
}
