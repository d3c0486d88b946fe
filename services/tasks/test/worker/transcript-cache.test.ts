import type { Message } from "@trellis/contracts/core";
import { describe, expect, it } from "vitest";
import { TranscriptCache, type TranscriptSession } from "../../src/worker/transcript-cache.js";
import { text, textOf } from "../support/fixtures.js";

/** Session `id` of workspace `ws_a` (or `workspaceId`). */
function s(id: string, workspaceId = "ws_a"): TranscriptSession {
  return { workspaceId, sessionId: id };
}

function transcriptOf(words: string[]) {
  const reads: [bigint, bigint][] = [];
  let messages: Message[] = words.map((w) => text(w));
  return {
    reads,
    set(next: string[]) {
      messages = next.map((w) => text(w));
    },
    read: async (_session: TranscriptSession, from: bigint, to: bigint) => {
      reads.push([from, to]);
      return messages.slice(Number(from), Number(to));
    },
  };
}

describe("transcript cache", () => {
  it("reads only what was appended since the last turn", async () => {
    const cache = new TranscriptCache();
    const t = transcriptOf(["a", "b", "c", "d"]);
    expect((await cache.history(t.read, s("s"), 0n, 2n)).map(textOf)).toEqual(["a", "b"]);
    expect((await cache.history(t.read, s("s"), 0n, 4n)).map(textOf)).toEqual(["a", "b", "c", "d"]);
    expect(t.reads).toEqual([
      [0n, 2n],
      [2n, 4n],
    ]);
  });

  it("uses what a turn appended without reading it back", async () => {
    const cache = new TranscriptCache();
    const t = transcriptOf(["a", "b"]);
    await cache.history(t.read, s("s"), 0n, 2n);
    cache.extend(s("s"), 0n, 2n, [text("c"), text("d")]);
    expect((await cache.history(t.read, s("s"), 0n, 4n)).map(textOf)).toEqual(["a", "b", "c", "d"]);
    expect(t.reads).toHaveLength(1);
    // An extension that does not continue the cached prefix drops the entry.
    cache.extend(s("s"), 0n, 9n, [text("x")]);
    t.set(["a", "b", "c", "d"]);
    await cache.history(t.read, s("s"), 0n, 4n);
    expect(t.reads.at(-1)).toEqual([0n, 4n]);
  });

  it("starts over after a truncate (new epoch)", async () => {
    const cache = new TranscriptCache();
    const t = transcriptOf(["a", "b", "c", "d"]);
    await cache.history(t.read, s("s"), 0n, 4n);
    t.set(["a", "z"]);
    expect((await cache.history(t.read, s("s"), 1n, 2n)).map(textOf)).toEqual(["a", "z"]);
    expect(t.reads.at(-1)).toEqual([0n, 2n]);
  });

  it("returns copies, and forgets the least recently used sessions", async () => {
    const cache = new TranscriptCache(2);
    const t = transcriptOf(["a"]);
    const first = await cache.history(t.read, s("s1"), 0n, 1n);
    (first as Message[]).push(text("mutated"));
    expect(await cache.history(t.read, s("s1"), 0n, 1n)).toHaveLength(1);
    await cache.history(t.read, s("s2"), 0n, 1n);
    await cache.history(t.read, s("s3"), 0n, 1n);
    const before = t.reads.length;
    await cache.history(t.read, s("s1"), 0n, 1n);
    expect(t.reads.length).toBe(before + 1);
  });
});

describe("transcript cache keys", () => {
  it("keeps two workspaces' sessions of one id apart", async () => {
    const cache = new TranscriptCache();
    const mine = transcriptOf(["a", "b"]);
    const theirs = transcriptOf(["x", "y", "z"]);
    expect((await cache.history(mine.read, s("ses_1"), 0n, 2n)).map(textOf)).toEqual(["a", "b"]);
    const other = await cache.history(theirs.read, s("ses_1", "ws_b"), 0n, 2n);
    expect(other.map(textOf)).toEqual(["x", "y"]);
    cache.extend(s("ses_1", "ws_b"), 0n, 2n, [text("z")]);
    // Each is served from its own entry: no read, and never the other's messages.
    expect((await cache.history(mine.read, s("ses_1"), 0n, 2n)).map(textOf)).toEqual(["a", "b"]);
    const more = await cache.history(theirs.read, s("ses_1", "ws_b"), 0n, 3n);
    expect(more.map(textOf)).toEqual(["x", "y", "z"]);
    expect(mine.reads).toHaveLength(1);
    expect(theirs.reads).toHaveLength(1);
  });
});

describe("transcript cache memory bound", () => {
  it("keeps at most its message budget, dropping the least recently run sessions", async () => {
    const cache = new TranscriptCache(10, 5);
    const t = transcriptOf(["a", "b", "c", "d", "e", "f"]);
    await cache.history(t.read, s("s1"), 0n, 2n);
    await cache.history(t.read, s("s2"), 0n, 2n);
    expect(cache.size).toBe(4);
    // s3 needs 2 more: s1 (least recently run) goes.
    await cache.history(t.read, s("s3"), 0n, 2n);
    expect(cache.size).toBe(4);
    const reads = t.reads.length;
    await cache.history(t.read, s("s2"), 0n, 2n);
    await cache.history(t.read, s("s3"), 0n, 2n);
    expect(t.reads).toHaveLength(reads);
    // Served from the cache: counted once however often.
    expect(cache.size).toBe(4);
    await cache.history(t.read, s("s1"), 0n, 2n);
    expect(t.reads).toHaveLength(reads + 1);
    expect(t.reads.at(-1)).toEqual([0n, 2n]);
  });

  it("does not cache a transcript longer than the whole budget, and still returns it", async () => {
    const cache = new TranscriptCache(10, 3);
    const t = transcriptOf(["a", "b", "c", "d"]);
    expect((await cache.history(t.read, s("long"), 0n, 4n)).map(textOf)).toEqual([
      "a",
      "b",
      "c",
      "d",
    ]);
    expect(cache.size).toBe(0);
    await cache.history(t.read, s("long"), 0n, 4n);
    expect(t.reads).toEqual([
      [0n, 4n],
      [0n, 4n],
    ]);
    // A session that grows past the budget by its turns' output is dropped too.
    await cache.history(t.read, s("short"), 0n, 2n);
    expect(cache.size).toBe(2);
    cache.extend(s("short"), 0n, 2n, [text("c"), text("d")]);
    expect(cache.size).toBe(0);
  });

  it("counts a session once when its epoch changes or its entry is replaced", async () => {
    const cache = new TranscriptCache(10, 100);
    const t = transcriptOf(["a", "b", "c", "d"]);
    await cache.history(t.read, s("s"), 0n, 4n);
    expect(cache.size).toBe(4);
    t.set(["a", "z"]);
    await cache.history(t.read, s("s"), 1n, 2n);
    expect(cache.size).toBe(2);
    cache.extend(s("s"), 1n, 2n, [text("y")]);
    expect(cache.size).toBe(3);
    cache.extend(s("s"), 1n, 9n, [text("x")]);
    expect(cache.size).toBe(0);
  });
});
