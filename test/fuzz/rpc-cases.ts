/**
 * Fuzz cases against the RPC surface (Connect, gRPC, gRPC-Web; JSON and
 * binary): a valid request from the descriptors, then mutated.
 */
import { MethodOptions_IdempotencyLevel } from "@bufbuild/protobuf/wkt";
import type { FuzzCase, FuzzSetup, WireProtocol } from "./fuzz-setup.js";
import { authHeaders, frame, jsonPrefix, mutateBinary, mutateJson } from "./mutations.js";
import type { Rng } from "./prng.js";
import { messageJson, toBinaryOf } from "./values.js";

function rpcHeaderMutation(
  rng: Rng,
  protocol: WireProtocol,
  mutations: string[],
): Record<string, string> {
  if (!rng.chance(0.18)) return {};
  const grpcish = protocol.startsWith("grpc");
  const options: Record<string, string>[] = grpcish
    ? [
        { "grpc-timeout": rng.pick(["abc", "-1m", "99999999999H", "1n", "", "10"]) },
        { "grpc-encoding": rng.pick(["gzip", "zstd", "identity", "br,gzip", "\u0000"]) },
        { "grpc-accept-encoding": "snappy" },
        {
          "content-type": rng.pick([
            "application/grpc+garbage",
            "application/grpc-web-text",
            "application/grpc; charset=latin1",
          ]),
        },
        { "x-request-id": "bad id\u00ff".repeat(5) },
        { traceparent: "00-zzzz-yyyy-01" },
        { "grpc-trace-bin": "!!!" },
      ]
    : [
        { "connect-timeout-ms": rng.pick(["soon", "-5", "1e9", "99999999999", ""]) },
        { "content-encoding": rng.pick(["gzip", "br", "zstd", "deflate, gzip"]) },
        { "connect-content-encoding": rng.pick(["gzip", "lz4"]) },
        { "connect-protocol-version": rng.pick(["2", "0", "one"]) },
        {
          "content-type": rng.pick([
            "text/plain",
            "application/json; charset=latin1",
            "application/x-www-form-urlencoded",
            "",
            "application/connect+json",
            "application/proto; x=y",
          ]),
        },
        { "accept-encoding": "gzip;q=0, br;q=1, *" },
        { "x-request-id": "../../../../" },
      ];
  const chosen = rng.pick(options);
  mutations.push(`hdr:${Object.keys(chosen).join(",")}`);
  return chosen;
}

const unknownPaths = [
  "/trellis.tasks.v1.TaskService/DropAllTables",
  "/trellis.nope.v1.Nothing/Here",
  "/grpc.health.v1.Health/check",
  "/trellis.tasks.v1.TaskService/",
  "//trellis.tasks.v1.TaskService/GetTask",
  "/trellis.tasks.v1.TaskService/GetTask/extra",
  "/%2e%2e/%2e%2e/etc/passwd",
  "/",
];

export function rpcCase(rng: Rng, index: number, setup: FuzzSetup): FuzzCase {
  const target = rng.pick(setup.rpcTargets);
  const method = target.method;
  const direct = target.directUrl !== undefined && (!target.viaGateway || rng.chance(0.15));
  const baseUrl = direct ? (target.directUrl as string) : setup.gatewayUrl;
  const streaming = method.methodKind === "server_streaming";
  const protocol = rng.weighted<WireProtocol>(
    streaming
      ? [
          [3, "grpc"],
          [2, "grpc-web"],
          [2, "connect-stream-json"],
          [2, "connect-stream-proto"],
        ]
      : [
          [3, "connect-json"],
          [2, "connect-proto"],
          [3, "grpc"],
          [1, "grpc-json"],
          [2, "grpc-web"],
          [
            method.idempotency === MethodOptions_IdempotencyLevel.NO_SIDE_EFFECTS ? 1 : 0,
            "connect-get",
          ],
        ],
  );
  const mutations: string[] = [];
  const json = messageJson(method.input, rng, setup);
  const binary = toBinaryOf(method.input, json) ?? new Uint8Array();
  const mutate = rng.chance(0.85);
  const jsonProtocol =
    protocol === "connect-json" ||
    protocol === "grpc-json" ||
    protocol === "connect-stream-json" ||
    protocol === "connect-get";
  // Lists of long strings can add up to megabytes: past twice the limit there
  // is nothing more to learn, so the body is cut there (another truncation).
  const keep = setup.maxBodyBytes * 2;
  let message: Uint8Array;
  if (!mutate) {
    message = jsonProtocol ? Buffer.from(jsonPrefix(json, keep)) : binary;
    mutations.push("valid-shape");
  } else if (jsonProtocol) {
    const m = mutateJson(rng, json, setup, keep);
    message = m.text;
    mutations.push(m.label);
  } else {
    const m = mutateBinary(rng, method.input, binary, setup);
    message = m.bytes;
    mutations.push(m.label);
  }

  if (message.byteLength > keep) {
    message = message.subarray(0, keep);
    mutations.push("cut-at-2x-limit");
  }

  let path = `/${method.parent.typeName}/${method.name}`;
  let unknownPath = false;
  if (rng.chance(0.04)) {
    path = rng.pick(unknownPaths);
    unknownPath = true;
    mutations.push("path:unknown");
  }

  const headers: Record<string, string> = direct ? {} : authHeaders(rng, setup, mutations);
  // Every RPC carries a deadline: a streaming method would otherwise run for as
  // long as its subject does, and Send waits for the turn to settle.
  const timeoutMs = streaming ? 1500 : 8000;
  let body: Uint8Array | undefined;
  let requestMethod = "POST";
  let transport: "h1" | "h2" = "h1";
  switch (protocol) {
    case "connect-json":
    case "connect-proto":
      headers["content-type"] =
        protocol === "connect-json" ? "application/json" : "application/proto";
      headers["connect-protocol-version"] = "1";
      headers["connect-timeout-ms"] = String(timeoutMs);
      body = message;
      break;
    case "connect-get": {
      requestMethod = "GET";
      headers["connect-timeout-ms"] = String(timeoutMs);
      const encoded = Buffer.from(message).toString("base64url");
      path += `?connect=v1&encoding=${rng.pick(["json", "proto", "xml"])}&base64=1&message=${encoded}`;
      break;
    }
    case "connect-stream-json":
    case "connect-stream-proto": {
      headers["content-type"] =
        protocol === "connect-stream-json"
          ? "application/connect+json"
          : "application/connect+proto";
      headers["connect-protocol-version"] = "1";
      headers["connect-timeout-ms"] = String(timeoutMs);
      const framed = frame(rng, message, mutate && rng.chance(0.3), undefined);
      if (framed.label) mutations.push(framed.label);
      body = framed.body;
      transport = rng.chance(0.5) ? "h2" : "h1";
      break;
    }
    case "grpc":
    case "grpc-json": {
      headers["content-type"] = protocol === "grpc" ? "application/grpc" : "application/grpc+json";
      headers.te = "trailers";
      headers["grpc-timeout"] = `${timeoutMs}m`;
      const framed = frame(rng, message, mutate && rng.chance(0.3), undefined);
      if (framed.label) mutations.push(framed.label);
      body = framed.body;
      transport = "h2";
      break;
    }
    default: {
      headers["content-type"] = "application/grpc-web+proto";
      headers["x-grpc-web"] = "1";
      headers["grpc-timeout"] = `${timeoutMs}m`;
      const framed = frame(rng, message, mutate && rng.chance(0.3), undefined);
      if (framed.label) mutations.push(framed.label);
      body = framed.body;
    }
  }
  Object.assign(headers, rpcHeaderMutation(rng, protocol, mutations));
  return {
    index,
    surface: "rpc",
    protocol,
    transport,
    baseUrl,
    request: {
      method: requestMethod,
      path,
      headers,
      ...(body ? { body } : {}),
      timeoutMs: timeoutMs + 10_000,
    },
    mutations,
    deadlineSet: true,
    unknownPath,
    target: `${direct ? "direct " : ""}${method.parent.typeName}/${method.name}`,
  };
}

/**
 * Loopback, private and metadata addresses in the URL spellings an outside
 * review got past the webhook guard, and their relatives (issue 22).
 */
