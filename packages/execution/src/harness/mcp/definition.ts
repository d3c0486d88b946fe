/**
 * The MCP section of a harness agent definition (`mcp_servers`) and the
 * deployment's MCP policy.
 *
 * ```json
 * "mcp_servers": [
 *   { "name": "files", "command": "mcp-files", "args": ["--root", "/srv/docs"],
 *     "require_approval": ["write_file"] },
 *   { "name": "docs", "url": "https://mcp.example.com/mcp",
 *     "bearer_secret": "vault_ops/docs_token", "tools": ["search"], "timeout_ms": 20000 }
 * ]
 * ```
 *
 * Each server is either a **stdio** server (`command`, `args`, `env`) the
 * harness starts as a child process, or a **Streamable HTTP** server (`url`,
 * optional `bearer_secret`: a vault secret `<vault_id>/<name>` sent as
 * `Authorization: Bearer …`). Its tools reach the model as
 * `mcp__<server>__<tool>`; `tools` keeps only the named ones (the server's own
 * names); `require_approval` (names, or `true` for all) gates calls exactly
 * as a registry tool's approval does; `timeout_ms` bounds each call (at most
 * the deployment's limit).
 *
 * A stdio command runs on the harness's host with its rights, so defining one
 * is an operator's decision, not an agent author's: the deployment lists the
 * commands agents may start ({@link McpPolicy.stdioCommands}, from
 * `TRELLIS_HARNESS_MCP_STDIO_COMMANDS`); without that list no stdio server is
 * accepted. HTTP servers must be `https:` and public unless the deployment
 * allows private addresses (tests and local development only).
 */
import { isIP } from "node:net";
import { isRecord } from "@trellis/runtime";
import { isPrivateAddress } from "./outbound.js";

/** How a server is reached. */
export type McpTransportSpec =
  | { kind: "stdio"; command: string; args: string[]; env: Record<string, string> }
  | { kind: "http"; url: URL; bearerSecret?: string };

/** One MCP server an agent uses. */
export interface McpServerSpec {
  /** `[A-Za-z0-9][A-Za-z0-9-]{0,31}`: the namespace of its tools. */
  name: string;
  transport: McpTransportSpec;
  /** The server's tools offered to the model (its own names); all when absent. */
  tools?: string[];
  /** The server's tools (own names) that need approval, or all. */
  requireApproval: string[] | "all";
  /** Per call. */
  timeoutMs: number;
}

/** What the deployment lets agents do with MCP (never from a definition). */
export interface McpPolicy {
  /**
   * Commands a stdio server may run: exact `command` strings, or `"any"`.
   * Default: none — stdio servers are refused.
   */
  stdioCommands?: "any" | readonly string[];
  /**
   * Let HTTP servers be on loopback / private / link-local addresses and use
   * plain `http:` (default false: refused). Tests and local development only.
   */
  allowPrivateAddresses?: boolean;
  /** Connecting and listing tools, per server (default 10 000 ms). */
  connectTimeoutMs?: number;
  /** Upper bound and default of a call's `timeout_ms` (default 60 000 ms). */
  callTimeoutMs?: number;
  /** A tool result longer than this many characters is cut (default 100 000). */
  maxResultChars?: number;
  /** Tools taken from one server (default 128; more are an error). */
  maxToolsPerServer?: number;
  /** Largest HTTP response body of a server, in bytes (default 8 MiB). */
  maxResponseBytes?: number;
}

/** The policy with its defaults filled in. */
export type ResolvedMcpPolicy = Required<McpPolicy>;

export function resolveMcpPolicy(policy: McpPolicy = {}): ResolvedMcpPolicy {
  return {
    stdioCommands: policy.stdioCommands ?? [],
    allowPrivateAddresses: policy.allowPrivateAddresses ?? false,
    connectTimeoutMs: policy.connectTimeoutMs ?? 10_000,
    callTimeoutMs: policy.callTimeoutMs ?? 60_000,
    maxResultChars: policy.maxResultChars ?? 100_000,
    maxToolsPerServer: policy.maxToolsPerServer ?? 128,
    maxResponseBytes: policy.maxResponseBytes ?? 8 * 1024 * 1024,
  };
}

/** Prefix of every MCP tool name the model sees. */
export const MCP_TOOL_PREFIX = "mcp__";

/** The name the model calls a server's tool by (`mcp__<server>__<tool>`). */
export function mcpToolName(server: string, tool: string): string {
  return `${MCP_TOOL_PREFIX}${server}__${tool}`;
}

/** A problem in the MCP section, at `path` (below `agent.definition`). */
export class McpDefinitionError extends Error {
  constructor(
    readonly detail: string,
    readonly path: string,
  ) {
    super(`${path}: ${detail}`);
    this.name = "McpDefinitionError";
  }
}

const SERVER_KEYS = new Set([
  "name",
  "command",
  "args",
  "env",
  "url",
  "bearer_secret",
  "tools",
  "require_approval",
  "timeout_ms",
]);
const SERVER_NAME = /^[A-Za-z0-9][A-Za-z0-9-]{0,31}$/;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/**
 * Variables that would change which program runs or what it loads (the
 * operator allowed a command, not whatever a loader can be told to run).
 */
const LOADER_ENV =
  /^(PATH|LD_.*|DYLD_.*|NODE_OPTIONS|NODE_PATH|PYTHON.*|PERL5.*|PERLLIB|RUBYOPT|RUBYLIB|BASH_ENV|ENV|JAVA_TOOL_OPTIONS|_JAVA_OPTIONS)$/i;
const VAULT_SECRET = /^[A-Za-z0-9_.:-]{1,128}\/[A-Za-z0-9_.-]{1,128}$/;
/** MCP tool names (2025-11 spec: 1–128 of these characters). */
const SERVER_TOOL = /^[A-Za-z0-9_.\-/]{1,128}$/;
const MAX_SERVERS = 16;

function stringList(value: unknown, path: string, pattern?: RegExp): string[] {
  if (!Array.isArray(value) || value.some((v) => typeof v !== "string")) {
    throw new McpDefinitionError("must be a list of strings", path);
  }
  for (const [i, v] of (value as string[]).entries()) {
    if (pattern && !pattern.test(v)) {
      throw new McpDefinitionError(`must match ${pattern}`, `${path}[${i}]`);
    }
    if (v.length > 4096) throw new McpDefinitionError("is too long", `${path}[${i}]`);
  }
  return value as string[];
}

function stdioOf(
  server: Record<string, unknown>,
  path: string,
  policy: ResolvedMcpPolicy,
): McpTransportSpec {
  const { command } = server;
  if (typeof command !== "string" || command.trim() === "") {
    throw new McpDefinitionError("must be a non-empty command", `${path}.command`);
  }
  const allowed = policy.stdioCommands;
  if (allowed !== "any" && !allowed.includes(command)) {
    throw new McpDefinitionError(
      allowed.length === 0
        ? "stdio MCP servers are not enabled on this deployment (an operator lists the allowed commands in TRELLIS_HARNESS_MCP_STDIO_COMMANDS)"
        : `is not among the stdio commands this deployment allows (${allowed.join(", ")})`,
      `${path}.command`,
    );
  }
  const args = server.args === undefined ? [] : stringList(server.args, `${path}.args`);
  const env: Record<string, string> = {};
  if (server.env !== undefined) {
    if (!isRecord(server.env)) throw new McpDefinitionError("must be an object", `${path}.env`);
    for (const [key, value] of Object.entries(server.env)) {
      if (!ENV_NAME.test(key) || typeof value !== "string" || value.length > 4096) {
        throw new McpDefinitionError(
          "must be a variable name (letters, digits, _) with a string value",
          `${path}.env.${key}`,
        );
      }
      if (LOADER_ENV.test(key)) {
        throw new McpDefinitionError(
          "may not be set: it changes which program runs or what it loads",
          `${path}.env.${key}`,
        );
      }
      env[key] = value;
    }
  }
  return { kind: "stdio", command, args, env };
}

function httpOf(
  server: Record<string, unknown>,
  path: string,
  policy: ResolvedMcpPolicy,
): McpTransportSpec {
  let url: URL;
  try {
    url = new URL(String(server.url));
  } catch {
    throw new McpDefinitionError("must be an absolute http(s) URL", `${path}.url`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new McpDefinitionError("must be an http(s) URL", `${path}.url`);
  }
  if (url.username !== "" || url.password !== "") {
    throw new McpDefinitionError(
      "must not carry credentials; name a vault secret in bearer_secret",
      `${path}.url`,
    );
  }
  if (!policy.allowPrivateAddresses) {
    if (url.protocol !== "https:") {
      throw new McpDefinitionError("must be an https URL", `${path}.url`);
    }
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (
      host === "localhost" ||
      host.endsWith(".localhost") ||
      (isIP(host) && isPrivateAddress(host))
    ) {
      throw new McpDefinitionError("must not name a loopback or private address", `${path}.url`);
    }
  }
  const secret = server.bearer_secret;
  if (secret !== undefined && (typeof secret !== "string" || !VAULT_SECRET.test(secret))) {
    throw new McpDefinitionError(
      "must name a vault secret as <vault_id>/<name>",
      `${path}.bearer_secret`,
    );
  }
  return { kind: "http", url, ...(typeof secret === "string" ? { bearerSecret: secret } : {}) };
}

function serverOf(value: unknown, path: string, policy: ResolvedMcpPolicy): McpServerSpec {
  if (!isRecord(value)) throw new McpDefinitionError("must be an object", path);
  for (const key of Object.keys(value)) {
    if (!SERVER_KEYS.has(key)) {
      throw new McpDefinitionError(
        `unknown field (known: ${[...SERVER_KEYS].join(", ")})`,
        `${path}.${key}`,
      );
    }
  }
  const { name } = value;
  if (typeof name !== "string" || !SERVER_NAME.test(name)) {
    throw new McpDefinitionError(`must match ${SERVER_NAME}`, `${path}.name`);
  }
  const hasCommand = value.command !== undefined;
  const hasUrl = value.url !== undefined;
  if (hasCommand === hasUrl) {
    throw new McpDefinitionError(
      "needs exactly one of command (stdio) or url (Streamable HTTP)",
      path,
    );
  }
  if (hasCommand && value.bearer_secret !== undefined) {
    throw new McpDefinitionError("is for HTTP servers only", `${path}.bearer_secret`);
  }
  if (hasUrl && (value.args !== undefined || value.env !== undefined)) {
    throw new McpDefinitionError(
      "are for stdio servers only",
      `${path}.${value.args !== undefined ? "args" : "env"}`,
    );
  }
  const transport = hasCommand ? stdioOf(value, path, policy) : httpOf(value, path, policy);
  const tools =
    value.tools === undefined ? undefined : stringList(value.tools, `${path}.tools`, SERVER_TOOL);
  let requireApproval: string[] | "all" = [];
  if (value.require_approval === true) requireApproval = "all";
  else if (value.require_approval !== undefined && value.require_approval !== false) {
    requireApproval = stringList(value.require_approval, `${path}.require_approval`, SERVER_TOOL);
  }
  let timeoutMs = policy.callTimeoutMs;
  if (value.timeout_ms !== undefined) {
    const t = value.timeout_ms;
    if (typeof t !== "number" || !Number.isInteger(t) || t < 1 || t > policy.callTimeoutMs) {
      throw new McpDefinitionError(
        `must be an integer in 1…${policy.callTimeoutMs}`,
        `${path}.timeout_ms`,
      );
    }
    timeoutMs = t;
  }
  return {
    name,
    transport,
    ...(tools ? { tools } : {}),
    requireApproval,
    timeoutMs,
  };
}

/** Validates `mcp_servers` (a list of at most 16 servers with distinct names). */
export function parseMcpServers(value: unknown, policy: ResolvedMcpPolicy): McpServerSpec[] {
  if (!Array.isArray(value)) throw new McpDefinitionError("must be a list", "mcp_servers");
  if (value.length > MAX_SERVERS) {
    throw new McpDefinitionError(`names more than ${MAX_SERVERS} servers`, "mcp_servers");
  }
  const servers = value.map((s, i) => serverOf(s, `mcp_servers[${i}]`, policy));
  const seen = new Set<string>();
  for (const [i, server] of servers.entries()) {
    if (seen.has(server.name)) {
      throw new McpDefinitionError("names a server twice", `mcp_servers[${i}].name`);
    }
    seen.add(server.name);
  }
  return servers;
}

/**
 * Whether `name` (a `require_approval` entry) is an MCP tool name of one of
 * `servers` (`mcp__<server>__<tool>`; its tools are only known when connected).
 */
export function isMcpToolOf(name: string, servers: readonly McpServerSpec[]): boolean {
  if (!name.startsWith(MCP_TOOL_PREFIX)) return false;
  const rest = name.slice(MCP_TOOL_PREFIX.length);
  const split = rest.indexOf("__");
  if (split <= 0) return false;
  const server = rest.slice(0, split);
  return servers.some((s) => s.name === server) && rest.length > split + 2;
}

function positiveInt(env: Record<string, string | undefined>, name: string): number | undefined {
  const text = env[name];
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`${name} must be a positive integer, got ${JSON.stringify(text)}`);
  }
  return value;
}

/**
 * The deployment's MCP policy from its environment:
 * `TRELLIS_HARNESS_MCP_STDIO_COMMANDS` (comma-separated commands agents may
 * start as stdio servers, or `*` for any; default none),
 * `TRELLIS_HARNESS_MCP_ALLOW_PRIVATE` (`1`/`true`: HTTP servers may be on
 * private / loopback addresses and plain http; default off),
 * `TRELLIS_HARNESS_MCP_CONNECT_TIMEOUT_MS`, `TRELLIS_HARNESS_MCP_CALL_TIMEOUT_MS`,
 * `TRELLIS_HARNESS_MCP_MAX_RESULT_CHARS`, `TRELLIS_HARNESS_MCP_MAX_RESPONSE_BYTES`.
 */
export function harnessMcpPolicyFromEnv(env: Record<string, string | undefined>): McpPolicy {
  const commands = (env.TRELLIS_HARNESS_MCP_STDIO_COMMANDS ?? "").trim();
  const allowPrivate = (env.TRELLIS_HARNESS_MCP_ALLOW_PRIVATE ?? "").trim().toLowerCase();
  const connectTimeoutMs = positiveInt(env, "TRELLIS_HARNESS_MCP_CONNECT_TIMEOUT_MS");
  const callTimeoutMs = positiveInt(env, "TRELLIS_HARNESS_MCP_CALL_TIMEOUT_MS");
  const maxResultChars = positiveInt(env, "TRELLIS_HARNESS_MCP_MAX_RESULT_CHARS");
  const maxResponseBytes = positiveInt(env, "TRELLIS_HARNESS_MCP_MAX_RESPONSE_BYTES");
  return {
    stdioCommands:
      commands === "*"
        ? "any"
        : commands
            .split(",")
            .map((c) => c.trim())
            .filter((c) => c !== ""),
    allowPrivateAddresses: allowPrivate === "1" || allowPrivate === "true",
    ...(connectTimeoutMs ? { connectTimeoutMs } : {}),
    ...(callTimeoutMs ? { callTimeoutMs } : {}),
    ...(maxResultChars ? { maxResultChars } : {}),
    ...(maxResponseBytes ? { maxResponseBytes } : {}),
  };
}
