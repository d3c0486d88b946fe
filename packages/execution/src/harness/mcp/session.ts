/**
 * The MCP servers of one harness turn, connected with the official SDK
 * (`@modelcontextprotocol/sdk`): the harness opens an {@link McpSession} when
 * a turn of an agent with `mcp_servers` starts, lists each server's tools,
 * offers them to the model as `mcp__<server>__<tool>` (input schemas passed
 * through), calls them over the same connection for the rest of the turn, and
 * closes every connection when the turn ends (completed, suspended, failed or
 * cancelled) — a stdio server's process is ended (stdin closed, then SIGTERM,
 * then SIGKILL), an HTTP session terminated.
 *
 * Everything is bounded: connecting and listing by the policy's connect
 * timeout, each call by the server's `timeout_ms`, results by
 * `maxResultChars`, a stdio server's messages by its read buffer. A server
 * that cannot be reached, exits, answers garbage or does not answer in time
 * raises an {@link McpToolError} with a typed `code`; the harness turns it into
 * the call's error result (or, at connect time, a retryable turn failure).
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  getDefaultEnvironment,
  StdioClientTransport,
} from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { isRecord } from "@trellis/runtime";
import { Ajv, type ValidateFunction } from "ajv";
import type { InputProblem } from "../tools.js";
import { type McpServerSpec, mcpToolName, type ResolvedMcpPolicy } from "./definition.js";
import { checkOutbound, guardedFetch, OutboundRefusedError } from "./outbound.js";

/** Why an MCP server could not serve (connect, list or call). */
export type McpErrorCode =
  /** Could not start / connect / initialize, or the outbound policy refused it. */
  | "mcp_unavailable"
  /** Did not answer within the bound. */
  | "mcp_timeout"
  /** Its process exited or the connection closed. */
  | "mcp_server_exited"
  /** It answered with a JSON-RPC error or a malformed result. */
  | "mcp_protocol_error"
  /** The tool ran and reported an error (`isError: true`). */
  | "mcp_tool_error";

export class McpToolError extends Error {
  constructor(
    readonly code: McpErrorCode,
    readonly server: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`[${code}] MCP server ${server}: ${message}`, options);
    this.name = "McpToolError";
  }
}

/** One tool of a connected server, as the model sees it. */
export interface McpTool {
  /** `mcp__<server>__<tool>`. */
  name: string;
  server: string;
  /** The server's own name of the tool. */
  tool: string;
  description: string;
  inputSchema: JsonObject;
  requiresApproval: boolean;
  /** Problems of an input (empty when valid, or when the schema could not be compiled). */
  check(input: unknown): InputProblem[];
}

/** A call's result as the tool message's text. */
export interface McpCallResult {
  text: string;
  /** The result was cut at the policy's limit. */
  truncated: boolean;
}

interface Connection {
  spec: McpServerSpec;
  client: Client;
  transport: Transport;
  /** Set when the connection closed (process exit, network). */
  closed?: string;
  /** A stdio server's process id, once started. */
  pid?: number;
  /** Why the connection was given up (an HTTP response over the bound). */
  failure?: string;
  stderr: string[];
}

/** Inputs (by server) the harness needs to connect. */
export interface McpConnectOptions {
  policy: ResolvedMcpPolicy;
  signal: AbortSignal;
  /** Reads a vault secret (`<vault_id>/<name>`) for `bearer_secret`; throws when unavailable. */
  secret(name: string): string;
}

const CLIENT_INFO = { name: "trellis-harness", version: "0.1.0" };
/** A stdio server's largest message (bytes). */
const STDIO_MAX_MESSAGE = 4 * 1024 * 1024;
const STDERR_TAIL = 2048;
/** How long a stdio server may take to exit on its closed stdin before it is signalled. */
const STDIO_EXIT_GRACE_MS = 300;
const MAX_LIST_PAGES = 16;
/** Compiled input validators by schema text, bounded (Ajv keeps every schema it compiled). */
const VALIDATORS_KEPT = 512;
let ajv = new Ajv({ allErrors: true, strict: false, validateSchema: false });
const validators = new Map<string, ValidateFunction | null>();

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Maps an SDK failure to a typed error. */
function typed(error: unknown, connection: Connection, doing: string): McpToolError {
  if (error instanceof McpToolError) return error;
  const server = connection.spec.name;
  if (connection.failure) {
    return new McpToolError("mcp_protocol_error", server, `${doing}: ${connection.failure}`, {
      cause: error,
    });
  }
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) {
      return new McpToolError("mcp_timeout", server, `no answer to ${doing} in time`, {
        cause: error,
      });
    }
    if (error.code === ErrorCode.ConnectionClosed || connection.closed) {
      return new McpToolError(
        "mcp_server_exited",
        server,
        `the connection closed during ${doing}${stderrTail(connection)}`,
        { cause: error },
      );
    }
    return new McpToolError("mcp_protocol_error", server, `${doing}: ${error.message}`, {
      cause: error,
    });
  }
  if (error instanceof OutboundRefusedError) {
    return new McpToolError("mcp_unavailable", server, error.message, { cause: error });
  }
  if (connection.closed) {
    return new McpToolError(
      "mcp_server_exited",
      server,
      `${connection.closed} during ${doing}${stderrTail(connection)}`,
      { cause: error },
    );
  }
  return new McpToolError("mcp_unavailable", server, `${doing}: ${describe(error)}`, {
    cause: error,
  });
}

function stderrTail(connection: Connection): string {
  const text = connection.stderr.join("").trim();
  return text === "" ? "" : ` (stderr: ${text.slice(-500)})`;
}

function transportOf(connection: Connection, options: McpConnectOptions): Transport {
  const { spec } = connection;
  const { transport } = spec;
  if (transport.kind === "stdio") {
    return new StdioClientTransport({
      command: transport.command,
      args: transport.args,
      // Only the SDK's safe defaults (PATH, HOME, …) and the definition's own
      // variables: never the harness's secrets.
      env: { ...getDefaultEnvironment(), ...transport.env },
      stderr: "pipe",
      maxBufferSize: STDIO_MAX_MESSAGE,
    });
  }
  const headers: Record<string, string> = {};
  if (transport.bearerSecret !== undefined) {
    headers.authorization = `Bearer ${options.secret(transport.bearerSecret)}`;
  }
  return new StreamableHTTPClientTransport(transport.url, {
    requestInit: { headers },
    fetch: guardedFetch(
      options.policy.allowPrivateAddresses,
      options.policy.maxResponseBytes,
      () => {
        // The SDK would wait for the cut stream's answer until the call's timeout:
        // closing the connection fails every request on it now.
        connection.failure ??= "the HTTP response is larger than the deployment's bound";
        void connection.client.close();
      },
    ),
    // A dropped SSE stream is not retried for long: calls are bounded anyway.
    reconnectionOptions: {
      initialReconnectionDelay: 500,
      maxReconnectionDelay: 2000,
      reconnectionDelayGrowFactor: 2,
      maxRetries: 1,
    },
  });
}

function validatorOf(schema: JsonObject): ((input: unknown) => InputProblem[]) | undefined {
  const { $schema: _ignored, ...rest } = schema;
  const key = JSON.stringify(rest);
  let validate = validators.get(key);
  if (validate === undefined) {
    if (validators.size >= VALIDATORS_KEPT) {
      validators.clear();
      ajv = new Ajv({ allErrors: true, strict: false, validateSchema: false });
    }
    try {
      validate = ajv.compile(rest);
    } catch {
      // A schema Ajv cannot compile (another draft): the server validates its input.
      validate = null;
    }
    validators.set(key, validate);
  }
  if (!validate) return undefined;
  const run = validate;
  return (input) =>
    run(input)
      ? []
      : (run.errors ?? []).map((e) => ({
          path: e.instancePath,
          message: e.message ?? "is invalid",
        }));
}

/** The text of a tool result's content (llm-provider §3: tool content is a string). */
function contentText(result: Record<string, unknown>): string {
  const content = Array.isArray(result.content) ? result.content : [];
  const parts: string[] = [];
  for (const item of content) {
    if (!isRecord(item)) continue;
    if (item.type === "text" && typeof item.text === "string") parts.push(item.text);
    else if (item.type === "resource" && isRecord(item.resource)) {
      const { resource } = item;
      parts.push(
        typeof resource.text === "string"
          ? resource.text
          : `[resource ${String(resource.uri)} (${String(resource.mimeType ?? "binary")}), content omitted]`,
      );
    } else if (item.type === "image" || item.type === "audio") {
      const size = typeof item.data === "string" ? item.data.length : 0;
      parts.push(`[${item.type} ${String(item.mimeType)}, ${size} base64 characters omitted]`);
    } else if (item.type === "resource_link") {
      parts.push(
        `[resource link ${String(item.uri)}${item.name ? ` (${String(item.name)})` : ""}]`,
      );
    } else {
      parts.push(JSON.stringify(item));
    }
  }
  if (parts.length === 0 && result.structuredContent !== undefined) {
    return JSON.stringify(result.structuredContent);
  }
  return parts.join("\n");
}

function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes sure a stdio server's process is gone: the SDK's close ends stdin and
 * signals it, but a close it began itself (a failed initialize) is not
 * awaited by a second close. SIGTERM, then SIGKILL after a second.
 */
async function ended(pid: number, exited: () => boolean): Promise<void> {
  if (exited() || !running(pid)) return;
  try {
    process.kill(pid, "SIGTERM");
  } catch {
    return;
  }
  for (let waited = 0; waited < 1000; waited += 50) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (exited() || !running(pid)) return;
  }
  try {
    process.kill(pid, "SIGKILL");
  } catch {
    // Gone meanwhile.
  }
}

/** The MCP connections of one turn. */
export class McpSession {
  readonly #connections = new Map<string, Connection>();
  readonly #tools = new Map<string, McpTool>();
  #closing: Promise<void> | undefined;
  #detach: (() => void) | undefined;

  private constructor(private readonly policy: ResolvedMcpPolicy) {}

  /**
   * Connects to every server (in parallel) and lists their tools.
   *
   * @throws McpToolError when one cannot be reached or listed in time (the
   *   others are closed again).
   */
  static async open(
    servers: readonly McpServerSpec[],
    options: McpConnectOptions,
  ): Promise<McpSession> {
    const session = new McpSession(options.policy);
    // A canceled turn closes its servers at once (the caller may not wait for the turn).
    const onAbort = () => void session.close();
    options.signal.addEventListener("abort", onAbort, { once: true });
    session.#detach = () => options.signal.removeEventListener("abort", onAbort);
    const results = await Promise.allSettled(servers.map((s) => session.#connect(s, options)));
    const failed = results.find((r) => r.status === "rejected");
    if (failed) {
      await session.close();
      throw failed.reason;
    }
    // Connected in parallel, offered in the definition's order (stable prompts).
    for (const result of results) {
      if (result.status !== "fulfilled") continue;
      for (const tool of result.value) session.#tools.set(tool.name, tool);
    }
    return session;
  }

  /** The tools of all servers, in server order. */
  get tools(): McpTool[] {
    return [...this.#tools.values()];
  }

  async #connect(spec: McpServerSpec, options: McpConnectOptions): Promise<McpTool[]> {
    const client = new Client(CLIENT_INFO, { capabilities: {} });
    const connection: Connection = {
      spec,
      client,
      transport: undefined as unknown as Transport,
      stderr: [],
    };
    const bounded = {
      timeout: this.policy.connectTimeoutMs,
      maxTotalTimeout: this.policy.connectTimeoutMs,
      signal: options.signal,
    };
    try {
      if (spec.transport.kind === "http") {
        await checkOutbound(spec.transport.url, this.policy.allowPrivateAddresses);
      }
      connection.transport = transportOf(connection, options);
    } catch (error) {
      throw typed(error, connection, "connecting");
    }
    this.#connections.set(spec.name, connection);
    if (connection.transport instanceof StdioClientTransport) {
      const transport = connection.transport;
      const start = transport.start.bind(transport);
      transport.start = async () => {
        await start();
        connection.pid = transport.pid ?? undefined;
      };
      let kept = 0;
      connection.transport.stderr?.on("data", (chunk: Buffer) => {
        if (kept >= STDERR_TAIL) return;
        const text = chunk.toString("utf8").slice(0, STDERR_TAIL - kept);
        kept += text.length;
        connection.stderr.push(text);
      });
    }
    client.onclose = () => {
      connection.closed ??= "the server closed the connection";
    };
    client.onerror = () => {
      // Transport errors reach pending requests as rejections; nothing to do here.
    };
    try {
      await client.connect(connection.transport, bounded);
    } catch (error) {
      throw typed(error, connection, "initialize");
    }
    const listed: { name: string; description?: string; inputSchema: unknown }[] = [];
    try {
      let cursor: string | undefined;
      for (let page = 0; page < MAX_LIST_PAGES; page += 1) {
        const answer = await client.listTools(cursor ? { cursor } : {}, bounded);
        listed.push(...answer.tools);
        if (listed.length > this.policy.maxToolsPerServer) {
          throw new McpToolError(
            "mcp_protocol_error",
            spec.name,
            `lists more than ${this.policy.maxToolsPerServer} tools; name the ones to use in tools`,
          );
        }
        cursor = answer.nextCursor;
        if (!cursor) break;
      }
    } catch (error) {
      throw typed(error, connection, "tools/list");
    }
    const byName = new Map(listed.map((t) => [t.name, t]));
    for (const wanted of spec.tools ?? []) {
      if (!byName.has(wanted)) {
        throw new McpToolError("mcp_protocol_error", spec.name, `has no tool ${wanted}`);
      }
    }
    const tools: McpTool[] = [];
    const chosen = spec.tools
      ? spec.tools.map((n) => byName.get(n) as (typeof listed)[number])
      : listed;
    for (const tool of chosen) {
      const name = mcpToolName(spec.name, tool.name);
      if (!/^[A-Za-z0-9_-]{1,64}$/.test(name)) {
        // Providers accept only these names: such a tool cannot be offered.
        if (spec.tools) {
          throw new McpToolError(
            "mcp_protocol_error",
            spec.name,
            `tool ${tool.name} cannot be offered to a model as ${name} (names are [A-Za-z0-9_-]{1,64})`,
          );
        }
        continue;
      }
      const schema = isRecord(tool.inputSchema) ? (tool.inputSchema as JsonObject) : {};
      const inputSchema: JsonObject = { type: "object", ...schema };
      const validate = validatorOf(inputSchema);
      tools.push({
        name,
        server: spec.name,
        tool: tool.name,
        description: tool.description ?? "",
        inputSchema,
        requiresApproval:
          spec.requireApproval === "all" || spec.requireApproval.includes(tool.name),
        check: (input) => {
          if (!isRecord(input)) return [{ path: "", message: "the input must be a JSON object" }];
          return validate ? validate(input) : [];
        },
      });
    }
    return tools;
  }

  /**
   * Calls a tool, bounded by its server's `timeout_ms`.
   *
   * @throws McpToolError (typed) when the server fails, exits, times out or
   *   the tool reports an error (`mcp_tool_error`, with the tool's text).
   */
  async call(name: string, input: JsonObject, signal: AbortSignal): Promise<McpCallResult> {
    const tool = this.#tools.get(name);
    const connection = tool && this.#connections.get(tool.server);
    if (!tool || !connection) throw new Error(`no MCP tool ${name} in this turn`);
    if (connection.failure) {
      throw new McpToolError("mcp_protocol_error", tool.server, connection.failure);
    }
    if (connection.closed) {
      throw new McpToolError(
        "mcp_server_exited",
        tool.server,
        `${connection.closed} before the call${stderrTail(connection)}`,
      );
    }
    let result: Record<string, unknown>;
    try {
      result = (await connection.client.callTool(
        { name: tool.tool, arguments: input as Record<string, unknown> },
        undefined,
        {
          timeout: connection.spec.timeoutMs,
          maxTotalTimeout: connection.spec.timeoutMs,
          signal,
        },
      )) as Record<string, unknown>;
    } catch (error) {
      if (signal.aborted) throw error;
      throw typed(error, connection, `tools/call ${tool.tool}`);
    }
    let text = contentText(result);
    let truncated = false;
    const limit = this.policy.maxResultChars;
    if (text.length > limit) {
      text = `${text.slice(0, limit)}\n[truncated: the result had ${text.length} characters; the limit is ${limit}]`;
      truncated = true;
    }
    if (result.isError === true) {
      throw new McpToolError(
        "mcp_tool_error",
        tool.server,
        `${tool.tool} reported an error: ${text}`,
      );
    }
    return { text, truncated };
  }

  /** Closes every connection (idempotent; never throws). */
  close(): Promise<void> {
    this.#detach?.();
    this.#closing ??= Promise.all(
      [...this.#connections.values()].map(async (c) => {
        try {
          if (c.transport instanceof StreamableHTTPClientTransport && !c.closed) {
            await Promise.race([
              c.transport.terminateSession().catch(() => undefined),
              new Promise((resolve) => setTimeout(resolve, 1000).unref()),
            ]);
          }
          // A stdio server gets a moment to exit on its closed stdin, then signals.
          const closing = c.client.close();
          await (c.pid === undefined
            ? closing
            : Promise.race([
                closing,
                new Promise((resolve) => setTimeout(resolve, STDIO_EXIT_GRACE_MS).unref()),
              ]));
        } catch {
          // Already gone.
        }
        // Signalled only while there is no sign it exited (its pid could be reused).
        if (c.pid !== undefined) await ended(c.pid, () => c.closed !== undefined);
      }),
    ).then(() => undefined);
    return this.#closing;
  }
}

/** JSON of an MCP tool's record on its tool message (`tool:<id>` → `mcp`). */
export function mcpRecord(tool: McpTool): JsonValue {
  return { server: tool.server, tool: tool.tool };
}
