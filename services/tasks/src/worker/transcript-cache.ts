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

/** Reads transcript positions `from` ≤ p < `to`. */
export type TranscriptReader = (sessionId: string, from: bigint, to: bigint) => Promise<Message[]>;

/** An LRU cache of session transcripts (prefixes of them). */
export class TranscriptCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxSessions: number;

  constructor(maxSessions = 256) {
    this.#maxSessions = maxSessions;
  }

  /** The transcript before `position` in transcript epoch `epoch`. */
  async history(
    read: TranscriptReader,
    sessionId: string,
    epoch: bigint,
    position: bigint,
  ): Promise<readonly Message[]> {
    let entry = this.#entries.get(sessionId);
    if (!entry || entry.epoch !== epoch || BigInt(entry.messages.length) > position) {
      entry = { epoch, messages: [] };
    }
    const have = BigInt(entry.messages.length);
    if (have < position) {
      const more = await read(sessionId, have, position);
      if (BigInt(more.length) !== position - have) {
        // The transcript is not what the claim said (cut meanwhile): do not cache it.
        this.#entries.delete(sessionId);
        return [...entry.messages, ...more];
      }
      entry.messages.push(...more);
    }
    this.#touch(sessionId, entry);
    return BigInt(entry.messages.length) === position
      ? entry.messages.slice()
      : entry.messages.slice(0, Number(position));
  }

  /** Record messages appended at `start` (kept only when they continue the cached prefix). */
  extend(sessionId: string, epoch: bigint, start: bigint, messages: readonly Message[]): void {
    const entry = this.#entries.get(sessionId);
    if (!entry) return;
    if (entry.epoch !== epoch || BigInt(entry.messages.length) !== start) {
      this.#entries.delete(sessionId);
      return;
    }
    entry.messages.push(...messages);
  }

  #touch(sessionId: string, entry: Entry): void {
    this.#entries.delete(sessionId);
    this.#entries.set(sessionId, entry);
    if (this.#entries.size > this.#maxSessions) {
      const oldest = this.#entries.keys().next().value;
      if (oldest !== undefined) this.#entries.delete(oldest);
    }
  }
}
