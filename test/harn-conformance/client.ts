/**
 * The outside client of the conformance flows: the gateway's black-box test
 * client (`@trellis/gateway/testing`: plain `fetch` with a bearer key and the
 * protocol version header, and an SSE reader), bound to one server and key.
 * It knows the protocol's documents only, nothing of Trellis' code.
 */
import {
  type ApiResponse,
  harnClient,
  harnHeaders,
  type Json,
  poll as pollUntil,
  type RequestOptions,
  type SseReader,
} from "@trellis/gateway/testing";

export { type Json, VERSION } from "@trellis/gateway/testing";

/** One response: status, headers, text and JSON (undefined when not JSON). */
export type Reply = ApiResponse<Json>;

/** Per-request options: `key: null` sends no credential, `version: null` no version. */
export type Options = Omit<RequestOptions, "body">;

/** A client of one Harn server, with a default key. */
export class HarnClient {
  private readonly http: ReturnType<typeof harnClient>;

  constructor(
    readonly baseUrl: string,
    readonly key: string,
  ) {
    this.http = harnClient(baseUrl, key);
  }

  /** The same server with another key. */
  as(key: string): HarnClient {
    return new HarnClient(this.baseUrl, key);
  }

  headersOf(options: Options = {}): Record<string, string> {
    return harnHeaders(this.key, options);
  }

  request(method: string, path: string, body?: unknown, options?: Options): Promise<Reply> {
    return this.http.request(method, path, { ...options, ...(body === undefined ? {} : { body }) });
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
  stream(path: string, options: Options = {}): Promise<SseReader> {
    return this.http.stream(path, options);
  }
}

/** Poll `check` every 50 ms until it returns a value (or fail after `timeoutMs`). */
export function poll<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 30_000,
): Promise<T> {
  return pollUntil(check, { what, timeoutMs, intervalMs: 50 });
}
