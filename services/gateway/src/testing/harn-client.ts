/**
 * A black-box Harn client for tests: plain `fetch`, knowing only the OpenAPI
 * document (paths, headers, envelopes).
 */
import { type ParsedSseFrame, parseSse } from "../domain/sse.js";

export const VERSION = "agents-protocol-2026-04-25";

/** Parsed JSON of a response: tests read it as loosely as a black-box client does. */
// biome-ignore lint/suspicious/noExplicitAny: test code reads arbitrary JSON documents.
export type Json = any;

/** Options of one request. */
export interface RequestOptions {
  body?: unknown;
  /** API key; `null` sends no Authorization header. */
  key?: string | null;
  /** Protocol version header; `null` sends none. */
  version?: string | null;
  headers?: Record<string, string>;
}

/** A response with its JSON (when there is one) and raw text. */
export interface ApiResponse<T = Json> {
  status: number;
  headers: Headers;
  text: string;
  json: T;
}

/**
 * The headers of one request: `options.headers`, then the bearer key
 * (`defaultKey` unless `options.key` says otherwise) and the protocol version.
 */
export function harnHeaders(
  defaultKey: string,
  options: Omit<RequestOptions, "body"> = {},
): Record<string, string> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? defaultKey : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  const version = options.version === undefined ? VERSION : options.version;
  if (version !== null) headers["harn-agents-protocol-version"] = version;
  return headers;
}

/** A client bound to a base URL and a default key. */
export function harnClient(baseUrl: string, defaultKey: string) {
  async function request<T = Json>(
    method: string,
    path: string,
    options: RequestOptions = {},
  ): Promise<ApiResponse<T>> {
    const headers = harnHeaders(defaultKey, options);
    if (options.body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers,
      ...(options.body !== undefined
        ? { body: typeof options.body === "string" ? options.body : JSON.stringify(options.body) }
        : {}),
    });
    const text = await response.text();
    let json: Json;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status: response.status, headers: response.headers, text, json };
  }
  return {
    request,
    get: <T = Json>(path: string, options?: RequestOptions) => request<T>("GET", path, options),
    post: <T = Json>(path: string, body?: unknown, options?: RequestOptions) =>
      request<T>("POST", path, { ...options, ...(body === undefined ? {} : { body }) }),
    /** Open an SSE stream. */
    async stream(path: string, options: RequestOptions = {}): Promise<SseReader> {
      const headers = { accept: "text/event-stream", ...harnHeaders(defaultKey, options) };
      const abort = new AbortController();
      const response = await fetch(`${baseUrl}${path}`, { headers, signal: abort.signal });
      return new SseReader(response, abort);
    },
  };
}

/** Reads SSE frames off a fetch response. */
export class SseReader {
  private buffer = "";
  private readonly frames: ParsedSseFrame[] = [];
  private readonly reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private readonly decoder = new TextDecoder();
  ended = false;
  /** Everything received, verbatim. */
  raw = "";

  constructor(
    readonly response: Response,
    private readonly abort: AbortController,
  ) {
    this.reader = response.body?.getReader();
  }

  /** The next frame (comments included), or undefined when the stream ended. */
  async next(timeoutMs = 5000): Promise<ParsedSseFrame | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = this.frames.shift();
      if (frame) return frame;
      if (this.ended || !this.reader) return undefined;
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`no SSE frame within ${timeoutMs} ms; got so far: ${this.raw.slice(-500)}`);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<"timeout">((resolve) => {
        timer = setTimeout(() => resolve("timeout"), left);
      });
      const chunk = await Promise.race([this.reader.read(), timeout]);
      clearTimeout(timer);
      if (chunk === "timeout") continue;
      if (chunk.done) {
        this.ended = true;
        continue;
      }
      const text = this.decoder.decode(chunk.value, { stream: true });
      this.raw += text;
      this.buffer += text;
      const { frames, rest } = parseSse(this.buffer);
      this.buffer = rest;
      this.frames.push(...frames);
    }
  }

  /** The next frame that carries data (skipping comments). */
  async nextEvent(timeoutMs = 5000): Promise<ParsedSseFrame | undefined> {
    for (;;) {
      const frame = await this.next(timeoutMs);
      if (frame === undefined || frame.data !== undefined) return frame;
    }
  }

  /** Read data frames until `stop` says so (inclusive). */
  async until(
    stop: (frame: ParsedSseFrame) => boolean,
    timeoutMs = 10_000,
  ): Promise<ParsedSseFrame[]> {
    const out: ParsedSseFrame[] = [];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = await this.nextEvent(Math.max(1, deadline - Date.now()));
      if (frame === undefined) return out;
      out.push(frame);
      if (stop(frame)) return out;
    }
  }

  close(): void {
    this.abort.abort();
  }
}

/** Poll until `check` returns a value. */
export async function poll<T>(
  check: () => Promise<T | undefined>,
  options: { timeoutMs?: number; intervalMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${options.what ?? "condition"}`);
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 25));
  }
}
