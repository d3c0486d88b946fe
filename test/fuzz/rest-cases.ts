/**
 * Fuzz cases against the REST surface: a valid request from the route
 * table, then mutated (body, params, headers, paths).
 */
import type { JsonValue } from "@bufbuild/protobuf";
import {
  type FuzzCase,
  type FuzzSetup,
  type Pool,
  type RestRouteInfo,
  TAKEN_SESSION_ID,
  TAKEN_VAULT_ID,
} from "./fuzz-setup.js";
import { authHeaders, mutateJson } from "./mutations.js";
import type { Rng } from "./prng.js";
import { hostileStrings, idFor } from "./values.js";

export const privateUrlSpellings = [
  "http://[::127.0.0.1]/hook",
  "http://[::7f00:1]/hook",
  "http://[::ffff:0:7f00:1]/hook",
  "http://[2002:7f00:1::]/hook",
  "http://[::ffff:7f00:1]/hook",
  "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
  "http://[2002:a9fe:a9fe::]/latest/meta-data",
  "http://[fe80::1%25lo]/hook",
  "http://[fd00:ec2::254]/latest/meta-data",
  "http://0x7f.1/hook",
  "http://2130706433/hook",
  "http://[::1]:8080/hook",
];

function restBody(route: RestRouteInfo, pool: Pool, rng?: Rng): JsonValue {
  const message = { role: "user", parts: [{ type: "text", text: "hello", visibility: "public" }] };
  const p = route.path;
  if (p === "/v1/sessions")
    return {
      workspace_id: "default",
      persona_id: pool.agentId,
      metadata: { a: 1 },
      initial_messages: [message],
    };
  if (p.endsWith("/close") || p.endsWith("/cancel")) return { reason: "fuzz" };
  if (p.endsWith("/fork")) return { at_message_count: 1, branch_id: "b1", metadata: {} };
  if (p.endsWith("/truncate")) return { keep_turns: 1 };
  if (p.endsWith("/tasks"))
    return {
      input: message,
      busy_policy: "enqueue",
      metadata: { k: "v" },
      session_id: pool.sessionId,
    };
  if (p === "/v1/tasks/{task_id}/messages") return { kind: "input", message };
  if (p.endsWith("/messages")) return { message };
  if (p === "/v1/workspaces") return { id: "ws_fuzz", name: "fuzz", metadata: {} };
  if (p === "/v1/personas")
    return {
      name: "p",
      backend: "scripted",
      version: "1",
      tools: ["t"],
      definition: { entry: "a", nodes: { a: {} }, edges: [] },
    };
  if (p === "/v1/artifacts")
    return {
      kind: "log",
      mime_type: "text/plain",
      visibility: "public",
      name: "a.log",
      content: "hello",
      session_id: pool.sessionId,
    };
  if (p === "/v1/vaults")
    return {
      id: TAKEN_VAULT_ID,
      // Another workspace each time (the admin key may name any).
      workspace_id: `ws_fuzz_${rng ? rng.int(0, 1_000_000_000) : 0}`,
      provider: "trellis",
      capabilities: ["read"],
    };
  if (p === "/v1/webhooks")
    return {
      url: rng ? rng.pick(privateUrlSpellings) : "http://[::7f00:1]/hook",
      event_types: ["session.closed"],
    };
  if (p.includes("keys")) return { name: "k", scopes: ["sessions:read"] };
  if (p.includes("oauth")) return { name: "c", scopes: ["sessions:read"] };
  return { name: "x" };
}

/** Every byte of the UTF-8 form percent-encoded (a lone surrogate becomes U+FFFD's bytes). */
function percentEncoded(text: string): string {
  return [...Buffer.from(text, "utf8")].map((b) => `%${b.toString(16).padStart(2, "0")}`).join("");
}

function restParam(rng: Rng, name: string, pool: Pool): string {
  const id = idFor(name, pool);
  if (id !== undefined && rng.chance(0.45)) return id;
  return rng.pick([
    percentEncoded(rng.pick(hostileStrings)) || "%20",
    "%ZZ",
    "%00",
    "%C3%28",
    "%ED%A0%80",
    "a".repeat(rng.int(300, 6000)),
    "..",
    "%2F..%2F",
    "ses_nope",
    "%F0%9F%A6%9C",
    "1e999",
  ]);
}

export function restCase(rng: Rng, index: number, setup: FuzzSetup): FuzzCase {
  const mutations: string[] = [];
  const route = rng.pick(setup.restRoutes);
  let unknownPath = false;
  let path = route.path.replace(/\{([a-z_]+)\}/g, (_m, name: string) =>
    restParam(rng, name, setup.pool),
  );
  let method = route.method;
  if (rng.chance(0.05)) {
    method = rng.pick(["PUT", "DELETE", "PATCH", "TRACE", "OPTIONS", "FOO"]);
    mutations.push(`method:${method}`);
  }
  if (rng.chance(0.05)) {
    path = rng.pick([
      "/v1/nope",
      "/v1/sessions/a/b/c/d",
      "/v2/sessions",
      "/v1//sessions",
      "/",
      "/favicon.ico",
      "/v1/sessions/%",
      "/V1/SESSIONS",
    ]);
    unknownPath = true;
    mutations.push("path:unknown");
  }
  if (method === "GET" || rng.chance(0.1)) {
    const params = new URLSearchParams();
    for (const name of [
      "limit",
      "cursor",
      "workspace_id",
      "session_id",
      "task_id",
      "after",
      "kind",
      "since",
      "type",
    ]) {
      if (!rng.chance(0.3)) continue;
      params.append(
        name,
        rng.pick([
          "-1",
          "0",
          "abc",
          "1e3",
          "201",
          "50",
          "%00",
          "",
          "9".repeat(30),
          restParam(rng, name, setup.pool),
        ]),
      );
      if (rng.chance(0.1)) params.append(name, "dup");
    }
    const query = params.toString();
    if (query) {
      path += `?${query}`;
      mutations.push("query");
    }
  }
  const headers: Record<string, string> = authHeaders(rng, setup, mutations);
  if (!rng.chance(0.08)) headers["harn-agents-protocol-version"] = setup.protocolVersion;
  else {
    const v = rng.pick(["", "agents-protocol-1999-01-01", "x".repeat(3000)]);
    if (v !== "") headers["harn-agents-protocol-version"] = v;
    mutations.push("hdr:version");
  }
  let body: Uint8Array | undefined;
  if (method === "POST" || (method !== "GET" && rng.chance(0.3))) {
    const json = restBody(route, setup.pool, rng);
    if (route.method === "POST" && route.path === "/v1/webhooks" && rng.chance(0.5)) {
      // Sent intact: a private target must be refused, whatever its spelling.
      body = Buffer.from(JSON.stringify(json));
      mutations.push("private-url");
    } else if (route.method === "POST" && route.path === "/v1/vaults" && rng.chance(0.5)) {
      // Sent intact: another workspace's id is no conflict (and says nothing).
      body = Buffer.from(JSON.stringify(json));
      mutations.push("foreign-id");
    } else if (route.method === "POST" && route.path === "/v1/sessions" && rng.chance(0.3)) {
      // The same for a session id the pool's workspace holds, in another
      // workspace each time (the admin key may name any).
      body = Buffer.from(
        JSON.stringify({
          ...(json as Record<string, JsonValue>),
          id: TAKEN_SESSION_ID,
          workspace_id: `ws_fuzz_${rng.int(0, 1_000_000_000)}`,
          persona_id: "agent_echo",
        }),
      );
      mutations.push("foreign-id");
    } else if (rng.chance(0.85)) {
      const m = mutateJson(rng, json, setup);
      body = m.text;
      mutations.push(m.label);
    } else {
      body = Buffer.from(JSON.stringify(json));
      mutations.push("valid-shape");
    }
    headers["content-type"] = rng.weighted([
      [10, "application/json"],
      [1, "text/plain"],
      [1, "application/x-www-form-urlencoded"],
      [1, "application/json; charset=iso-8859-1"],
      [1, "multipart/form-data; boundary=x"],
    ]);
    if (headers["content-type"] !== "application/json") mutations.push("hdr:content-type");
  }
  if (rng.chance(0.1)) {
    const extra = rng.pick<Record<string, string>>([
      { "idempotency-key": rng.pick(["", "k".repeat(300), "ключ", "a\tb", "fuzz-key"]) },
      { origin: rng.pick(["https://evil.example", "null", "http://localhost:5173"]) },
      { origin: "https://evil.example", "access-control-request-method": "POST" },
      { "last-event-id": rng.pick(["garbage", "-1", "9".repeat(40)]) },
      { accept: "text/event-stream" },
      { "x-request-id": "\u00ff\u00fe" },
    ]);
    Object.assign(headers, extra);
    mutations.push(`hdr:${Object.keys(extra).join(",")}`);
  }
  return {
    index,
    surface: "rest",
    protocol: "rest",
    transport: "h1",
    baseUrl: setup.gatewayUrl,
    request: { method, path, headers, ...(body ? { body } : {}), timeoutMs: 20_000 },
    mutations,
    deadlineSet: false,
    unknownPath,
    target: `${route.method} ${route.path}`,
    ...(mutations.includes("private-url") && method === "POST" && !unknownPath
      ? { mustRefuse: "a webhook to a loopback, private or metadata address" }
      : {}),
    ...(mutations.includes("foreign-id") && method === "POST" && !unknownPath
      ? { leakStatuses: [409] }
      : {}),
  };
}
