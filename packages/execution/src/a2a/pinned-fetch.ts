/**
 * A `fetch` for the A2A client whose connections go only where the address
 * check allows, checked at connect time: the socket's own DNS lookup
 * resolves the host, refuses the connection if any address is refused, and
 * hands the checked address to the socket — so the address checked is the
 * address connected to (a name that turns from public to 127.0.0.1 between
 * two lookups, DNS rebinding, is refused). An IP literal host is connected
 * to without a lookup and is checked before the request.
 *
 * Redirects are followed (at most {@link MAX_REDIRECTS}), each target
 * checked as a new connection: never from https down to http, and the
 * bearer credential is sent to the original origin only.
 */
import { lookup as dnsLookup, type LookupAddress } from "node:dns";
import { request as httpRequest, type IncomingMessage } from "node:http";
import { request as httpsRequest } from "node:https";
import { isIP } from "node:net";
import { Readable } from "node:stream";
import { TrellisError } from "@trellis/runtime";

/** Why an address may not be connected to; undefined when it may. */
export type AddressRefusal = (address: string) => string | undefined;

/** Options of {@link pinnedFetch}. */
export interface PinnedFetchOptions {
  /** The address check (the host's outbound address policy). */
  refusal: AddressRefusal;
  /** Skip the check (`TRELLIS_A2A_ALLOW_PRIVATE=1`). */
  allowPrivate: boolean;
  /** Sent as `authorization: Bearer …` to the first request's origin only. */
  token?: string;
  /** Redirects followed at most (default {@link MAX_REDIRECTS}; 0: none, a redirect fails the fetch). */
  maxRedirects?: number;
  /** The error a refused address fails with (default {@link refusedTarget}, naming A2A's setting). */
  refused?: Refused;
}

/** Makes the error a refused address fails with. */
export type Refused = (host: string, why: string) => Error;

export const MAX_REDIRECTS = 5;

export function refusedTarget(host: string, why: string): TrellisError {
  return new TrellisError({
    reason: "permission_denied",
    message: `the A2A agent at ${host} resolves to a private or special address (${why}); set TRELLIS_A2A_ALLOW_PRIVATE=1 to allow it`,
    domain: "adapters",
  });
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/** The code of a connection the lookup refused (the error itself says why). */
const BLOCKED = "EOUTBOUNDBLOCKED";
const refusedHere = (e: Error) =>
  e instanceof TrellisError || (e as { code?: unknown }).code === BLOCKED;

/** A socket `lookup` that refuses a host with any refused address, and pins the checked ones. */
export function pinnedLookup(refusal: AddressRefusal, refused: Refused = refusedTarget) {
  return (hostname: string, options: { all?: boolean }, callback: LookupCallback): void => {
    dnsLookup(hostname, { all: true, verbatim: true }, (error, found) => {
      if (error) return callback(error, "");
      const bad = found.find((a) => refusal(a.address) !== undefined);
      if (bad !== undefined || found.length === 0) {
        const why = bad ? (refusal(bad.address) as string) : "no address";
        return callback(Object.assign(refused(hostname, why), { code: BLOCKED }), "");
      }
      if (options.all) return callback(null, found);
      const first = found[0] as LookupAddress;
      callback(null, first.address, first.family);
    });
  };
}

function checkLiteral(url: URL, options: PinnedFetchOptions): void {
  if (options.allowPrivate) return;
  const host = url.hostname.replace(/^\[|\]$/g, "");
  if (isIP(host) === 0) return;
  const why = options.refusal(host);
  if (why !== undefined) throw (options.refused ?? refusedTarget)(url.host, why);
}

async function bodyOf(
  init: RequestInit | undefined,
  input: string | URL | Request,
): Promise<Buffer | undefined> {
  if (init?.body !== undefined && init.body !== null) {
    return Buffer.from(await new Response(init.body).arrayBuffer());
  }
  if (input instanceof Request && input.body !== null)
    return Buffer.from(await input.arrayBuffer());
  return undefined;
}

function send(
  url: URL,
  method: string,
  headers: Headers,
  body: Buffer | undefined,
  signal: AbortSignal | undefined,
  options: PinnedFetchOptions,
): Promise<IncomingMessage> {
  checkLiteral(url, options);
  const request = url.protocol === "https:" ? httpsRequest : httpRequest;
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const req = request(url, {
      method,
      headers: {
        ...Object.fromEntries(headers),
        ...(body === undefined ? {} : { "content-length": String(body.length) }),
      },
      ...(options.allowPrivate
        ? {}
        : { lookup: pinnedLookup(options.refusal, options.refused) as never }),
    });
    // The signal is followed here, not by http.request's own `signal`: that
    // one destroys the socket even after the exchange ended, when the socket
    // may be back in the agent's pool with no error listener (an unhandled
    // 'error'). An abort ends the request, or the response still arriving.
    let response: IncomingMessage | undefined;
    const onAbort = () => {
      const reason = signal?.reason instanceof Error ? signal.reason : new Error("aborted");
      if (!response?.complete) (response ?? req).destroy(reason);
    };
    const release = () => signal?.removeEventListener("abort", onAbort);
    signal?.addEventListener("abort", onAbort, { once: true });
    req.once("response", (res: IncomingMessage) => {
      response = res;
      // The body's reader (Readable.toWeb) gets its errors; one that comes
      // when nobody reads any more must not be an unhandled 'error' event.
      res.on("error", () => {}).once("close", release);
      resolve(res);
    });
    // `on`, not `once`: an abort after an earlier error emits a second one.
    req.on("error", (error: Error) => {
      if (response === undefined) release();
      // As fetch: an abort rejects with the signal's reason, a refusal as itself.
      if (signal?.aborted) reject(signal.reason ?? error);
      else if (refusedHere(error)) reject(error);
      else reject(Object.assign(new TypeError(`fetch failed: ${error.message}`), { cause: error }));
    });
    req.end(body);
  });
}

/** The fetch described above. */
export function pinnedFetch(options: PinnedFetchOptions): typeof fetch {
  const { maxRedirects = MAX_REDIRECTS, refused = refusedTarget } = options;
  return async (input, init) => {
    let url = new URL(input instanceof Request ? input.url : String(input));
    const origin = url.origin;
    let method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
    const headers = new Headers(input instanceof Request ? input.headers : undefined);
    for (const [name, value] of new Headers(init?.headers)) headers.set(name, value);
    let body = await bodyOf(init, input);
    const signal =
      init?.signal ?? (input instanceof Request ? input.signal : undefined) ?? undefined;
    for (let hop = 0; ; hop++) {
      // A credential (the token, or the caller's own header) stays on its origin.
      if (url.origin !== origin) headers.delete("authorization");
      else if (options.token !== undefined) {
        headers.set("authorization", `Bearer ${options.token}`);
      }
      const res = await send(url, method, headers, body, signal, options);
      const status = res.statusCode ?? 502;
      const location = res.headers.location;
      if (status >= 300 && status < 400 && status !== 304 && location !== undefined) {
        res.resume();
        if (hop >= maxRedirects)
          throw new TypeError(`fetch failed: more than ${maxRedirects} redirects`);
        const next = new URL(location, url);
        if (
          next.protocol !== "https:" &&
          (url.protocol === "https:" || next.protocol !== "http:")
        ) {
          throw refused(next.host, "a redirect may not leave https or http(s)");
        }
        // 303, and 301/302 of a POST, become a GET without a body (as fetch does).
        if (status === 303 || ((status === 301 || status === 302) && method === "POST")) {
          method = "GET";
          body = undefined;
          headers.delete("content-type");
          headers.delete("content-length");
        }
        url = next;
        continue;
      }
      const responseHeaders = new Headers();
      for (const [name, value] of Object.entries(res.headers)) {
        if (value === undefined) continue;
        for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, v);
      }
      const empty = status === 204 || status === 304 || method === "HEAD";
      if (empty) res.resume();
      const response = new Response(
        empty ? null : (Readable.toWeb(res) as ReadableStream<Uint8Array>),
        { status, statusText: res.statusMessage ?? "", headers: responseHeaders },
      );
      Object.defineProperty(response, "url", { value: url.href });
      return response;
    }
  };
}
