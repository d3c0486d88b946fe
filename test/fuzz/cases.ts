/**
 * The fuzz run's request generator: from a seed and a case number, one
 * malformed (or merely hostile) request against the REST surface or an RPC —
 * valid requests first, built from the route table and the protobuf
 * descriptors, then mutated: byte flips, truncation, type swaps, huge and
 * deeply nested payloads, unknown enum names, bad UTF-8, bad framing, bad
 * headers, bad paths.
 */
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import type { FuzzCase, FuzzSetup, Surface } from "./fuzz-setup.js";
import { Rng } from "./prng.js";
import { restCase } from "./rest-cases.js";
import { rpcCase } from "./rpc-cases.js";

export {
  type FuzzCase,
  type FuzzSetup,
  type Pool,
  type RestRouteInfo,
  type RpcTarget,
  type Surface,
  TAKEN_SESSION_ID,
  TAKEN_VAULT_ID,
  type WireProtocol,
} from "./fuzz-setup.js";
export { privateUrlSpellings } from "./rest-cases.js";
export { messageJson } from "./values.js";

const rawRequests: readonly { label: string; text: (setup: FuzzSetup) => string }[] = [
  { label: "raw:garbage", text: () => "GARBAGE\r\n\r\n" },
  {
    label: "raw:http10-no-host",
    text: () =>
      "POST /grpc.health.v1.Health/Check HTTP/1.0\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}",
  },
  {
    label: "raw:huge-header",
    text: () => `GET /v1 HTTP/1.1\r\nhost: x\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`,
  },
  {
    label: "raw:bad-chunked",
    text: () =>
      "POST /v1/sessions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ncontent-type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
  },
  {
    label: "raw:content-length-and-chunked",
    text: () =>
      "POST /v1/sessions HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
  },
  {
    label: "raw:bad-header-name",
    text: () => "GET /v1 HTTP/1.1\r\nhost: x\r\nbad header: 1\r\n\r\n",
  },
  { label: "raw:absolute-form", text: () => "GET http://[::1 HTTP/1.1\r\nhost: x\r\n\r\n" },
];

/**
 * Header values as bytes a client can put on the wire: Node's HTTP clients
 * refuse characters outside latin1 and control characters (so would any
 * proxy); the UTF-8 bytes of anything else go as latin1.
 */
function sendable(fuzzCase: FuzzCase): FuzzCase {
  const headers = fuzzCase.request.headers ?? {};
  for (const [name, value] of Object.entries(headers)) {
    headers[name] = Buffer.from(value, "utf8")
      .toString("latin1")
      .replace(/[^\t\x20-\x7e\x80-\xff]/g, "");
  }
  return fuzzCase;
}

/** The request of case `index` under `seed`. */
export function generateCase(seed: number, index: number, setup: FuzzSetup): FuzzCase {
  const rng = Rng.forCase(seed, index);
  const surface = rng.weighted<Surface>([
    [40, "rest"],
    [59, "rpc"],
    [1, "raw"],
  ]);
  if (surface === "rest") return sendable(restCase(rng, index, setup));
  if (surface === "rpc") return sendable(rpcCase(rng, index, setup));
  const raw = rng.pick(rawRequests);
  return {
    index,
    surface: "raw",
    protocol: "raw-http",
    transport: "socket",
    baseUrl: setup.gatewayUrl,
    request: { path: "" },
    raw: raw.text(setup),
    mutations: [raw.label],
    deadlineSet: false,
    unknownPath: false,
    target: "http",
  };
}

/** Every method of `services`, for {@link FuzzSetup.rpcTargets}. */
export function methodsOf(services: readonly DescService[]): DescMethod[] {
  return services.flatMap((s) => s.methods);
}
