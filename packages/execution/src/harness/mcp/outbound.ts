/**
 * The outbound address policy of MCP HTTP connections: a server whose host
 * is (or resolves to) a loopback, private, link-local, shared, multicast or
 * otherwise special address is refused unless the deployment allows private
 * addresses (`TRELLIS_HARNESS_MCP_ALLOW_PRIVATE`, tests and local development).
 *
 * {@link checkOutbound} is the one place the decision is made, so a shared
 * deployment-wide policy can replace it. It runs before every HTTP request of
 * a connection (through {@link guardedFetch}, which also refuses redirects).
 * Known gap: the address checked is resolved again by `fetch`; a DNS answer
 * that changes in between (rebinding) is not caught here.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { outboundAddressRefusal } from "@trellis/platform";

export function isPrivateAddress(address: string): boolean {
  // One policy decides what is private for every outbound call (webhooks,
  // A2A, MCP): every IPv4-mapped, NAT64, 6to4 spelling of loopback, private
  // and metadata addresses included.
  return outboundAddressRefusal(address) !== undefined;
}

/** An outbound request the policy refuses. */
export class OutboundRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "OutboundRefusedError";
  }
}

/**
 * Refuses `url` unless its host resolves only to public addresses, or
 * `allowPrivate` is set.
 *
 * @throws OutboundRefusedError naming the host (never a credential).
 */
export async function checkOutbound(url: URL, allowPrivate: boolean): Promise<void> {
  if (allowPrivate) return;
  if (url.protocol !== "https:") {
    throw new OutboundRefusedError(`${url.protocol} to ${url.host} is refused (https only)`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, "");
  let addresses: string[];
  if (isIP(host)) addresses = [host];
  else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch (error) {
      throw new OutboundRefusedError(`cannot resolve ${host}: ${(error as Error).message}`);
    }
  }
  const refused = addresses.find(isPrivateAddress);
  if (refused !== undefined || addresses.length === 0) {
    throw new OutboundRefusedError(
      `${host} resolves to a loopback, private or special address; refused by the outbound policy`,
    );
  }
}

/** A response body longer than the bound. */
export class ResponseTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`the response is larger than ${limit} bytes`);
    this.name = "ResponseTooLargeError";
  }
}

/** `body`, erroring once more than `limit` bytes went through. */
function bounded(
  body: ReadableStream<Uint8Array>,
  limit: number,
  onTooLarge?: () => void,
): ReadableStream<Uint8Array> {
  let seen = 0;
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        seen += chunk.byteLength;
        if (seen > limit) {
          controller.error(new ResponseTooLargeError(limit));
          onTooLarge?.();
        } else controller.enqueue(chunk);
      },
    }),
  );
}

/**
 * `fetch` that checks each request's URL first, never follows a redirect,
 * and cuts a response body off after `maxResponseBytes` (calling
 * `onTooLarge`: a cut stream does not fail the requests waiting on it).
 */
export function guardedFetch(
  allowPrivate: boolean,
  maxResponseBytes: number,
  onTooLarge?: () => void,
): typeof fetch {
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    await checkOutbound(url, allowPrivate);
    const response = await fetch(input, { ...init, redirect: "error" });
    const length = Number(response.headers.get("content-length") ?? "0");
    if (length > maxResponseBytes) {
      await response.body?.cancel();
      onTooLarge?.();
      throw new ResponseTooLargeError(maxResponseBytes);
    }
    if (!response.body) return response;
    return new Response(bounded(response.body, maxResponseBytes, onTooLarge), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}
