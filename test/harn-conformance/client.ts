/**
 * The outside client of the conformance flows: plain `fetch` with a bearer
 * key and the protocol version header, and a small SSE reader. It knows the
 * protocol's documents only, nothing of Trellis' code.
 */

export const VERSION = "agents-protocol-2026-04-25";

/** JSON as a black-box client reads it: loosely. */
// biome-ignore lint/suspicious/noExplicitAny: responses are arbitrary JSON documents.
export type Json = any;

/** One response: status, headers, text and JSON (undefined when not JSON). */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  json: Json;
}

/** Per-request options: `key: null` sends no credential, `version: null` no version. */
export interface Options {
  key?: string | null;
  version?: string | null;
  headers?: Record<string, string>;
}

/** A client of one Harn server, with a default key. */
export class HarnClient {
  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {}

  /** The same server with another key. */
  as(key: string): HarnClient {
    return new HarnClient(this.baseUrl, key);
  }

  headersOf(options: Options = {}): Record<string, string> {
    const headers: Record<string, string> = { ...options.headers };
    const key = options.key === undefined ? this.key : options.key;
    if (key !== null) headers.authorization = `Bearer ${key}`;
    const version = options.version === undefined ? VERSION : options.version;
    if (version !== null) headers["harn-agents-protocol-version"] = version;
    return headers;
  }

  async request(method: string, path: string, body?: unknown, options?: Options): Promise<Reply> {
    const headers = this.headersOf(options);
    if (body !== undefined) headers["content-type"] = "application/json";
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers,
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
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

  get(path: string, options?: Options): Promise<Reply> {
    return this.request("GET", path, undefined, options);
  }

  post(path: string, body: unknown = {}, options?: Options): Promise<Reply> {
    return this.request("POST", path, body, options);
  }

  patch(path: string, body: unknown, options?: Options): Promise<Reply> {
    return this.request("PATCH", path, body, options);
  }

  /** Open an SSE stream (`Last-Event-ID` through `options.headers`). */
  async stream(path: string, options: Options = {}): Promise<SseStream> {
    const abort = new AbortController();
    const response = await fetch(`${this.baseUrl}${path}`, {
      headers: { accept: "text/event-stream", ...this.headersOf(options) },
      signal: abort.signal,
    });
    return new SseStream(response, abort);
  }
}

/** One SSE frame with data. */
export interface Frame {
  id: string | undefined;
  event: string | undefined;
  data: string;
}

/** Reads data frames of a `text/event-stream` response (comments skipped). */
export class SseStream {
  private buffer = "";
  private readonly ready: Frame[] = [];
  private readonly reader: ReadableStreamDefaultReader<Uint8Array> | undefined;
  private readonly decoder = new TextDecoder();
  ended = false;

  constructor(
    readonly response: Response,
    private readonly abort: AbortController,
  ) {
    this.reader = response.body?.getReader();
  }

  /** The next data frame; undefined once the stream ended; throws after `timeoutMs`. */
  async next(timeoutMs = 10_000): Promise<Frame | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = this.ready.shift();
      if (frame) return frame;
      if (this.ended || !this.reader) return undefined;
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no SSE frame within ${timeoutMs} ms`);
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
      this.buffer += this.decoder.decode(chunk.value, { stream: true }).replace(/\r\n?/g, "\n");
      this.parse();
    }
  }

  /** Frames until `stop` holds for one (included) or the stream ends. */
  async until(stop: (frame: Frame) => boolean, timeoutMs = 20_000): Promise<Frame[]> {
    const out: Frame[] = [];
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const frame = await this.next(Math.max(1, deadline - Date.now()));
      if (frame === undefined) return out;
      out.push(frame);
      if (stop(frame)) return out;
    }
  }

  close(): void {
    this.abort.abort();
  }

  private parse(): void {
    for (;;) {
      const end = this.buffer.indexOf("\n\n");
      if (end < 0) return;
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      let id: string | undefined;
      let event: string | undefined;
      const data: string[] = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") id = value;
        else if (field === "event") event = value;
        else if (field === "data") data.push(value);
      }
      if (data.length > 0) this.ready.push({ id, event, data: data.join("\n") });
    }
  }
}

/** Poll `check` until it returns a value (or fail after `timeoutMs`). */
export async function poll<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
