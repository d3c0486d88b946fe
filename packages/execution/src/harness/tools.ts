/**
 * The harness's tool registry: tools are code registered when the adapter is
 * built; agents name the ones they may use. Every tool declares a JSON Schema
 * for its input, and arguments are validated against it before the tool
 * runs — a model's malformed call never reaches tool code.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import type { RunMemory } from "@trellis/adapter-sdk";
import { Ajv, type ValidateFunction } from "ajv";

/** What a running tool knows about its call. */
export interface ToolContext {
  taskId: string;
  sessionId: string;
  workspaceId: string;
  toolCallId: string;
  /** Aborted when the turn is canceled or times out. */
  signal: AbortSignal;
  /**
   * Reads the clock, as an RFC 3339 UTC string, for a named reading
   * (`[A-Za-z0-9_.:-]{1,128}`; the same label in one call reads once). The
   * reading is recorded as `time:<label>` on the call's tool message, so a
   * replay gets it again (or the replay's `time:<label>` override).
   */
  now(label: string): string;
  /**
   * A deployment secret's value (undefined when it has none). Only its hash
   * is recorded, as `secret:<name>` on the call's tool message; a replay can
   * give it again only through a `secret:<name>` override.
   */
  secret(name: string): string | undefined;
  /**
   * The run's memory, when its host keeps one (the host records each read
   * and write on the task's event log).
   */
  memory?: RunMemory;
}

/** A tool the harness can run. */
export interface HarnessTool {
  /** Unique name the model calls it by (`[A-Za-z0-9_-]{1,64}`, what the providers accept). */
  name: string;
  description: string;
  /** JSON Schema of the input object (draft-07 / 2019-09 keywords). */
  inputSchema: JsonObject;
  /** JSON Schema of the result, when declared (listed with the tool's skill). */
  outputSchema?: JsonObject;
  /**
   * A person must approve each call before it runs: the turn suspends with the
   * pending call, and runs it (once) only on an approval signal.
   */
  requiresApproval?: boolean;
  /**
   * The result depends only on the input and what the tool reads through
   * `context.now` / `context.secret`, and running it has no side effect: a
   * replay given a `time:` or `secret:` override for a reading of the call
   * runs it again with the override instead of serving the recorded result.
   */
  deterministic?: boolean;
  /** Runs the tool; a string is the result as is, anything else is sent as JSON. */
  run(input: JsonObject, context: ToolContext): Promise<JsonValue> | JsonValue;
}

/** A tool call's input did not match the tool's schema. */
export interface InputProblem {
  /** JSON Pointer into the input ("" for the whole input). */
  path: string;
  message: string;
}

const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Tools by name, with their compiled input validators. */
export class ToolRegistry {
  readonly #tools = new Map<string, { tool: HarnessTool; validate: ValidateFunction }>();
  readonly #ajv = new Ajv({ allErrors: true, strict: false });

  constructor(tools: readonly HarnessTool[] = []) {
    for (const tool of tools) this.register(tool);
  }

  /** Adds a tool; throws when the name is taken or invalid, or the schema does not compile. */
  register(tool: HarnessTool): void {
    if (!TOOL_NAME.test(tool.name)) {
      throw new Error(`tool name ${JSON.stringify(tool.name)} must match ${TOOL_NAME}`);
    }
    if (this.#tools.has(tool.name)) throw new Error(`tool ${tool.name} is already registered`);
    if (tool.inputSchema.type !== undefined && tool.inputSchema.type !== "object") {
      throw new Error(`tool ${tool.name}: the input schema must describe an object`);
    }
    const validate = this.#ajv.compile(tool.inputSchema);
    this.#tools.set(tool.name, { tool, validate });
  }

  get(name: string): HarnessTool | undefined {
    return this.#tools.get(name)?.tool;
  }

  has(name: string): boolean {
    return this.#tools.has(name);
  }

  names(): string[] {
    return [...this.#tools.keys()];
  }

  /** The problems of `input` for tool `name` (empty when valid). */
  check(name: string, input: unknown): InputProblem[] {
    const entry = this.#tools.get(name);
    if (!entry) return [{ path: "", message: `no tool ${name}` }];
    if (typeof input !== "object" || input === null || Array.isArray(input)) {
      return [{ path: "", message: "the input must be a JSON object" }];
    }
    if (entry.validate(input)) return [];
    return (entry.validate.errors ?? []).map((error) => ({
      path: error.instancePath,
      message: error.message ?? "is invalid",
    }));
  }
}

/** A tool's result as the text of a tool message (llm-provider §3: tool content is a string). */
export function resultText(value: JsonValue): string {
  return typeof value === "string" ? value : JSON.stringify(value);
}
