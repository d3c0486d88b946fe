/**
 * The outbound address policy of MCP HTTP connections: a server whose host
 * is (or resolves to) a loopback, private, link-local, shared, multicast or
 * otherwise special address is refused unless the deployment allows private
 * addresses (`TRELLIS_HARNESS_MCP_ALLOW_PRIVATE`, tests and local development).
 *
 * The addresses are judged by the platform's one policy
 * (`outboundAddressRefusal`). {@link checkOutbound} refuses a server early,
 * when the session connects; what counts is the check at connect time:
 * {@link guardedFetch} sends every HTTP request of a connection through the
 * A2A backend's `pinnedFetch`, whose socket lookup resolves the host, refuses
 * the connection if any address is refused and connects to the address it
 * checked — so a DNS answer that changes after the early check (rebinding) is
 * refused too. Redirects are not followed.
 */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { outboundAddressRefusal } from "@trellis/platform";
import { type AddressRefusal, pinnedFetch } from "../../a2a/pinned-fetch.js";

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
  checkScheme(url);
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

function checkScheme(url: URL): void {
  if (url.protocol !== "https:") {
    throw new OutboundRefusedError(`${url.protocol} to ${url.host} is refused (https only)`);
  }
}

function refusedAddress(host: string, why: string): OutboundRefusedError {
  return new OutboundRefusedError(
    `${host} resolves to a loopback, private or special address (${why}); refused by the outbound policy`,
  );
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
 * `fetch` that connects only where the policy allows, checked at connect time
 * on the address connected to (`pinnedFetch`; `refusal` defaults to the
 * platform's policy), https only, never follows a redirect, and cuts a
 * response body off after `maxResponseBytes` (calling `onTooLarge`: a cut
 * stream does not fail the requests waiting on it).
 */
export function guardedFetch(
  allowPrivate: boolean,
  maxResponseBytes: number,
  onTooLarge?: () => void,
  refusal: AddressRefusal = outboundAddressRefusal,
): typeof fetch {
  const send = pinnedFetch({ refusal, allowPrivate, maxRedirects: 0, refused: refusedAddress });
  return async (input, init) => {
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (!allowPrivate) checkScheme(url);
    const response = await send(input, init);
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
