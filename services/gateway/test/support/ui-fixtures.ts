/**
 * Shared by the stream tests and the browser tests: a scripted agent that
 * calls a tool, then proposes a gated one and waits for approval, a reader
 * of the UI stream's frames, and a session's whole event log read over REST.
 */
import type { harnClient, Json, SseReader } from "@trellis/gateway/testing";
import { expect } from "vitest";

export { replyGraph, waitGraph } from "@trellis/gateway/testing";

/**
 * A turn of this agent: assistant text with a `weather` call (`call_1`), its
 * result, then a `write_file` call (`call_2`) that waits for approval
 * (`approved: true` runs it, anything else refuses). `delayMs` slows the
 * first step (a slow model), so a test can act while the turn runs.
 */
export function gatedToolAgent(delayMs = 0): Json {
  return {
    entry: "plan",
    nodes: {
      plan: {
        update: {
          ...(delayMs > 0 ? { delay_ms: delayMs } : {}),
          messages: [
            {
              role: "assistant",
              content: "Checking the weather for {{input}}.",
              tool_calls: [{ id: "call_1", name: "weather", arguments: { city: "Paris" } }],
            },
            { role: "tool", tool_call_id: "call_1", name: "weather", content: "sunny, 21°C" },
            {
              role: "assistant",
              content: "It is sunny. May I write the forecast to a file?",
              tool_calls: [
                { id: "call_2", name: "write_file", arguments: { path: "forecast.txt" } },
              ],
            },
          ],
        },
      },
      gate: { suspend: { signal_id: "approval", metadata: { kind: "approval" } } },
      write: {
        update: {
          messages: [
            { role: "tool", tool_call_id: "call_2", name: "write_file", content: "wrote 12 bytes" },
            { role: "assistant", content: "Done: the forecast is in forecast.txt." },
          ],
        },
      },
      refuse: {
        update: { messages: [{ role: "assistant", content: "Understood, I did not write it." }] },
      },
    },
    edges: [
      { from: "plan", to: "gate" },
      { from: "gate", to: "write", when: { path: "approved", equals: true } },
      { from: "gate", to: "refuse" },
      { from: "write", to: "END" },
      { from: "refuse", to: "END" },
    ],
  };
}

/** A scripted agent that answers `Echo: <input>` (after `delayMs`). */
export function echoAgent(delayMs = 0): Json {
  return {
    entry: "reply",
    nodes: {
      reply: {
        update: {
          ...(delayMs > 0 ? { delay_ms: delayMs } : {}),
          messages: [{ role: "assistant", content: "Echo: {{input}}" }],
        },
      },
    },
    edges: [{ from: "reply", to: "END" }],
  };
}

/**
 * A scripted agent that streams its reply (`Streaming reply to <input>: …`)
 * as text deltas, `chunkChars` characters every `chunkDelayMs`, before the
 * whole message is recorded.
 */
export function streamingAgent(chunkChars = 4, chunkDelayMs = 20): Json {
  return {
    entry: "reply",
    nodes: {
      reply: {
        update: {
          stream: { chunk_chars: chunkChars, delay_ms: chunkDelayMs },
          messages: [
            {
              role: "assistant",
              content: `Streaming reply to {{input}}: ${STREAMED_TAIL}`,
            },
          ],
        },
      },
    },
    edges: [{ from: "reply", to: "END" }],
  };
}

/** The fixed end of {@link streamingAgent}'s reply (long enough to stream for a while). */
export const STREAMED_TAIL =
  "every few characters arrive as a token, the preview grows, and the final response confirms it.";

/** Register a scripted agent (a Harn persona) and return its id. */
export async function createScriptedAgent(
  api: ReturnType<typeof harnClient>,
  name: string,
  definition: Json,
): Promise<string> {
  const persona = await api.post("/v1/personas", {
    name,
    entry_workflow: "scripted",
    definition,
  });
  if (persona.status !== 201) throw new Error(`creating the agent failed: ${persona.text}`);
  return persona.json.id as string;
}

/** The body that approves (or denies) a suspended task through its signal. */
export function confirmation(approved: boolean): Json {
  return {
    kind: "tool_confirmation",
    message: { role: "user", parts: [{ type: "json", value: { approved } }] },
  };
}

/** One frame of the UI stream, parsed. */
export interface UiStreamFrame {
  id: string | undefined;
  type: string;
  // biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary payloads.
  payload: any;
  /** The frame's data text, verbatim (for byte-exact comparisons). */
  data: string;
}

/** Read UI frames (skipping comments) until `stop` holds for one, inclusive. */
export async function readUiFrames(
  stream: SseReader,
  stop: (frame: UiStreamFrame) => boolean,
  timeoutMs = 15_000,
): Promise<UiStreamFrame[]> {
  const frames = await stream.until((f) => {
    const parsed = JSON.parse(f.data ?? "{}");
    return stop({ id: f.id, type: parsed.type, payload: parsed.payload, data: f.data ?? "" });
  }, timeoutMs);
  return frames.map((f) => {
    const parsed = JSON.parse(f.data ?? "{}");
    return { id: f.id, type: f.event ?? "", payload: parsed.payload, data: f.data ?? "" };
  });
}

/** Every event of a session, in log order, read over REST (all pages). */
export async function allEvents(
  api: ReturnType<typeof harnClient>,
  sessionId: string,
): Promise<Json[]> {
  const out: Json[] = [];
  let cursor = "";
  for (;;) {
    const page = await api.get(
      `/v1/sessions/${sessionId}/events?limit=200${cursor ? `&after_event_id=${cursor}` : ""}`,
    );
    expect(page.status).toBe(200);
    out.push(...page.json.data);
    if (!page.json.page.has_more) return out;
    cursor = page.json.page.next_cursor;
  }
}
