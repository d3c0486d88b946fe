// The owner's key of a session (src/store/session-stream.ts): its journal
// stream, lock, state in memory and lease name the workspace and the id.
import { describe, expect, it } from "vitest";
import { sessionStream } from "../../src/store/session-stream.js";

describe("session stream", () => {
  it("names the workspace and the id: one id in two workspaces is two streams", () => {
    const a = sessionStream({ workspace_id: "ws_a", id: "ses_team_standup" });
    const b = sessionStream({ workspace_id: "ws_b", id: "ses_team_standup" });
    expect(a).not.toBe(b);
    expect(a).toBe(sessionStream({ workspace_id: "ws_a", id: "ses_team_standup" }));
  });

  it("is unambiguous whatever characters the ids hold", () => {
    const names = new Set(
      [
        ["a/b", "c"],
        ["a", "b/c"],
        ['a","b', "c"],
        ["a", '","b'],
        ["", "a"],
        ["a", ""],
      ].map(([w, id]) => sessionStream({ workspace_id: w as string, id: id as string })),
    );
    expect(names.size).toBe(6);
  });

  it("stays within the journal's 256 characters for the longest ids", () => {
    const long = sessionStream({ workspace_id: "ws_a", id: "x".repeat(512) });
    const other = sessionStream({ workspace_id: "ws_b", id: "x".repeat(512) });
    expect(long.length).toBeLessThanOrEqual(256);
    expect(long).toMatch(/^sha256:[0-9a-f]{64}$/);
    expect(long).not.toBe(other);
  });
});
