/**
 * Talking to the gateway from the browser: the Harn REST surface with the
 * API key the operator pasted once (kept in sessionStorage, so it lives as
 * long as the tab and is never written to disk by the UI), and the UI event
 * stream read with fetch (an EventSource cannot send the Authorization
 * header).
 */
import type { StreamItem } from "./contract.ts";

/** The Harn protocol version the gateway requires on every /v1 call. */
export const PROTOCOL_VERSION = "agents-protocol-2026-04-25";

const KEY_ITEM = "trellis.apiKey";

/** Origin prefix of every call ("" in the browser: same origin; tests set a server's URL). */
let apiBase = "";

/** Send every call to `base` (e.g. `http://127.0.0.1:8080`) instead of the page's origin. */
export function setApiBase(base: string): void {
  apiBase = base.replace(/\/+$/, "");
}

/** The API key of this tab, if the operator signed in. */
export function storedKey(): string | null {
  return sessionStorage.getItem(KEY_ITEM);
}

export function storeKey(key: string): void {
  sessionStorage.setItem(KEY_ITEM, key);
}

export function forgetKey(): void {
  sessionStorage.removeItem(KEY_ITEM);
}

/** An error answer of the gateway (the Harn error envelope). */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param: string | null = null,
  ) {
    super(message);
    this.name = "ApiError";
  }
}

// Works outside secure contexts too (crypto.randomUUID does not).
function randomKey(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return `ui-${Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("")}`;
}

function headers(key: string | null, extra: Record<string, string> = {}): Headers {
  const out = new Headers({ "harn-agents-protocol-version": PROTOCOL_VERSION, ...extra });
  if (key) out.set("authorization", `Bearer ${key}`);
  return out;
}

async function errorOf(response: Response): Promise<ApiError> {
  let body: { error?: { code?: string; message?: string; param?: string | null } } = {};
  try {
    body = await response.json();
  } catch {
    // Not an error envelope (a proxy's page): say what we know.
  }
  return new ApiError(
    response.status,
    body.error?.code ?? `http_${response.status}`,
    body.error?.message ?? `${response.status} ${response.statusText}`,
    body.error?.param ?? null,
  );
}

/** One call of the REST surface; JSON in, JSON out. Writes carry an Idempotency-Key. */
export async function api<T = Record<string, unknown>>(
  method: "GET" | "POST",
  path: string,
  body?: unknown,
  key: string | null = storedKey(),
): Promise<T> {
  const extra: Record<string, string> = {};
  if (body !== undefined) extra["content-type"] = "application/json";
  if (method === "POST") extra["idempotency-key"] = randomKey();
  const response = await fetch(`${apiBase}${path}`, {
    method,
    headers: headers(key, extra),
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  if (!response.ok) throw await errorOf(response);
  return (await response.json()) as T;
}

/** A page of a Harn list. */
export interface ListPage<T> {
  data: T[];
  page?: { next_cursor?: string | null; has_more?: boolean };
}

/**
 * Every item of a Harn list, following `next_cursor` for at most `maxPages`
 * pages of `limit` (bounded: a huge list is cut, never read unbounded).
 */
export async function listAll<T = Record<string, unknown>>(
  path: string,
  { limit = 200, maxPages = 5 }: { limit?: number; maxPages?: number } = {},
): Promise<T[]> {
  const out: T[] = [];
  let cursor: string | null | undefined = null;
  for (let page = 0; page < maxPages; page += 1) {
    const query = new URLSearchParams({ limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    const sep = path.includes("?") ? "&" : "?";
    const result: ListPage<T> = await api<ListPage<T>>("GET", `${path}${sep}${query}`);
    out.push(...result.data);
    cursor = result.page?.next_cursor;
    if (!cursor || result.page?.has_more === false) break;
  }
  return out;
}

/** Cancel a running task (the composer's Stop). */
export function cancelTask(taskId: string): Promise<Record<string, unknown>> {
  return api("POST", `/v1/tasks/${encodeURIComponent(taskId)}/cancel`, {});
}

/** Approve or deny the tool call a suspended task waits on. */
export function confirmTool(taskId: string, approved: boolean): Promise<Record<string, unknown>> {
  // The gateway's signal route: a tool confirmation resumes the waiting task.
  return api("POST", `/v1/tasks/${encodeURIComponent(taskId)}/messages`, {
    kind: "tool_confirmation",
    message: { role: "user", parts: [{ type: "json", value: { approved } }] },
  });
}

/** Options of {@link openUiStream}. */
export interface UiStreamOptions {
  sessionId: string;
  tier: "default" | "debug";
  /** Replay up to and including this event, then stop (a branch's inherited history). */
  until?: string;
  onItem(item: StreamItem): void;
  /** The stream failed in a way a retry will not fix (e.g. 401, 404). */
  onFatal(error: ApiError): void;
  /** Connection state, for the status line. */
  onState?(state: "connecting" | "live" | "retrying" | "ended"): void;
}

/**
 * Follow a session's UI stream. When the connection drops it reconnects
 * with `Last-Event-ID` set to the last cursor received, so the server sends
 * exactly what came after it. Returns a function that closes the stream.
 */
export function openUiStream(options: UiStreamOptions): () => void {
  const abort = new AbortController();
  let lastCursor: string | undefined;
  let delay = 500;

  const run = async () => {
    while (!abort.signal.aborted) {
      options.onState?.(lastCursor ? "retrying" : "connecting");
      const query = new URLSearchParams({ tier: options.tier });
      if (options.until) query.set("until", options.until);
      const extra: Record<string, string> = { accept: "text/event-stream" };
      if (lastCursor) extra["last-event-id"] = lastCursor;
      try {
        const response = await fetch(
          `${apiBase}/v1/ui/sessions/${encodeURIComponent(options.sessionId)}/events/stream?${query}`,
          { headers: headers(storedKey(), extra), signal: abort.signal },
        );
        if (!response.ok) {
          const error = await errorOf(response);
          if (response.status >= 400 && response.status < 500 && response.status !== 429) {
            options.onFatal(error);
            return;
          }
          throw error;
        }
        options.onState?.("live");
        delay = 500;
        const ended = await readFrames(response, (frame) => {
          if (frame.event === "stream_error") throw new Error(frame.data);
          const envelope = JSON.parse(frame.data) as StreamItem["envelope"];
          if (frame.id !== undefined) lastCursor = frame.id;
          options.onItem({ ...(frame.id !== undefined ? { cursor: frame.id } : {}), envelope });
        });
        if (ended && options.until) {
          options.onState?.("ended");
          return;
        }
      } catch (error) {
        if (abort.signal.aborted) return;
        void error;
      }
      options.onState?.("retrying");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, 8000);
    }
  };
  void run();
  return () => abort.abort();
}

/**
 * Follow a session's health snapshots (`health_snapshot` frames of
 * `/v1/ui/sessions/{id}/health/stream`), reconnecting on drops. Returns a
 * function that closes the stream.
 */
export function openHealthStream(
  sessionId: string,
  onSnapshot: (snapshot: Record<string, unknown>) => void,
  onFatal: (error: ApiError) => void,
): () => void {
  const abort = new AbortController();
  const run = async () => {
    while (!abort.signal.aborted) {
      try {
        const response = await fetch(
          `${apiBase}/v1/ui/sessions/${encodeURIComponent(sessionId)}/health/stream`,
          {
            headers: headers(storedKey(), { accept: "text/event-stream" }),
            signal: abort.signal,
          },
        );
        if (!response.ok) {
          const error = await errorOf(response);
          if (response.status >= 400 && response.status < 500 && response.status !== 429) {
            onFatal(error);
            return;
          }
          throw error;
        }
        await readFrames(response, (frame) => {
          if (frame.event !== "health_snapshot") return;
          const envelope = JSON.parse(frame.data) as { payload: Record<string, unknown> };
          onSnapshot(envelope.payload);
        });
      } catch (error) {
        if (abort.signal.aborted) return;
        void error;
      }
      await new Promise((resolve) => setTimeout(resolve, 2000));
    }
  };
  void run();
  return () => abort.abort();
}

export interface Frame {
  id?: string;
  event?: string;
  data: string;
}

/** Read SSE frames off a response body; true when the server ended the stream. */
export async function readFrames(
  response: Response,
  onFrame: (frame: Frame) => void,
): Promise<boolean> {
  const reader = response.body?.getReader();
  if (!reader) return true;
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return true;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const frame: Frame = { data: "" };
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "id") frame.id = value;
        else if (field === "event") frame.event = value;
        else if (field === "data") data.push(value);
      }
      if (data.length > 0) {
        frame.data = data.join("\n");
        onFrame(frame);
      }
      end = buffer.indexOf("\n\n");
    }
  }
}
