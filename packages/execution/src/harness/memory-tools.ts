/**
 * The harness's built-in memory tools (Harn v1 "Memory"): `memory_read`
 * returns the newest records of a scope, `memory_write` stores one. The
 * owner of each scope is the run's own (its agent for `persona`, its
 * session, its workspace, or the tenant); the host that keeps the memory
 * records every read and write on the task's event log
 * (`agent.memory_read` / `agent.memory_write`).
 *
 * Neither is deterministic: a replay serves a call's recorded result (the
 * values read at the time), unless it asked for refreshed memory.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import type { HarnessTool, ToolContext } from "./tools.js";

/** Name of the memory read tool. */
export const MEMORY_READ = "memory_read";
/** Name of the memory write tool. */
export const MEMORY_WRITE = "memory_write";

const scopeSchema = {
  type: "string",
  enum: ["persona", "session", "workspace", "tenant"],
  description:
    "whose memory: this agent (persona), this session, this workspace, or the whole tenant",
};

const recordSchema: JsonObject = {
  type: "object",
  properties: {
    id: { type: "string" },
    content: { type: ["string", "object"] },
    created_at: { type: "string" },
    provenance: { type: "object" },
  },
  required: ["id", "content"],
};

function memoryOf(context: ToolContext) {
  if (!context.memory) throw new Error("this run has no memory (its host keeps none)");
  return context.memory;
}

/** `memory_read({scope, limit?})` → `{memories: [{id, content, created_at, provenance}]}`. */
export const MEMORY_READ_TOOL: HarnessTool = {
  name: MEMORY_READ,
  description:
    "Read the newest durable memories of a scope (persona, session, workspace or tenant), newest first.",
  inputSchema: {
    type: "object",
    properties: {
      scope: scopeSchema,
      limit: { type: "integer", minimum: 1, maximum: 10 },
    },
    required: ["scope"],
    additionalProperties: false,
  },
  outputSchema: {
    type: "object",
    properties: { memories: { type: "array", items: recordSchema } },
    required: ["memories"],
  },
  async run(input, context) {
    const found = await memoryOf(context).read({
      scope: String(input.scope),
      ...(typeof input.limit === "number" ? { limit: input.limit } : {}),
      toolCallId: context.toolCallId,
    });
    return {
      memories: found.map((m) => ({
        id: m.id,
        content: m.content,
        created_at: m.createdAt,
        provenance: m.provenance,
      })),
    };
  },
};

/** `memory_write({scope, content})` → `{id}`. */
export const MEMORY_WRITE_TOOL: HarnessTool = {
  name: MEMORY_WRITE,
  description:
    "Store a durable memory (text or a JSON object) under a scope, for later tasks to read.",
  inputSchema: {
    type: "object",
    properties: {
      scope: scopeSchema,
      content: { type: ["string", "object"], minLength: 1 },
    },
    required: ["scope", "content"],
    additionalProperties: false,
  },
  outputSchema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
  async run(input, context) {
    const content = input.content;
    if (content === undefined || content === null) throw new Error("content is required");
    const written = await memoryOf(context).write({
      scope: String(input.scope),
      content,
      toolCallId: context.toolCallId,
    });
    return { id: written.id };
  },
};

/** The built-in memory tools. */
export const MEMORY_TOOLS: readonly HarnessTool[] = [MEMORY_READ_TOOL, MEMORY_WRITE_TOOL];

/** `tools` with the memory tools added (a tool already given under the same name wins). */
export function withMemoryTools(tools: readonly HarnessTool[]): HarnessTool[] {
  const names = new Set(tools.map((t) => t.name));
  return [...tools, ...MEMORY_TOOLS.filter((t) => !names.has(t.name))];
}
