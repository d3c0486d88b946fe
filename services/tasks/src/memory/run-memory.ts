/**
 * The memory a running turn reads and writes (`ExecutionRequest.memory`),
 * recorded on the task's event log next to its other progress:
 *
 * | call    | event               | data                                                  |
 * |---------|---------------------|-------------------------------------------------------|
 * | `read`  | `agent.memory_read`  | `{scope, owner_id, tool_call_id?, memories: [{id, content, created_at, provenance}]}` |
 * | `write` | `agent.memory_write` | `{scope, owner_id, tool_call_id?, memory_id}`        |
 *
 * A read records the values it returned, so a replay can serve them again
 * instead of what the memory holds by then. A write is idempotent per task
 * and tool call (`run:<task>:<tool call>`), so a retried call writes once.
 * The owner of each scope is the run's own: its agent (persona), session,
 * workspace, or the tenant.
 */
import { createHash } from "node:crypto";
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { EVENT_KIND } from "@trellis/contracts/event-kinds";
import type { RunMemory, RunMemoryRecord } from "@trellis/execution";
import type { ProgressItem } from "../worker/progress.js";
import type { Memories } from "./memories.js";
import { DEFAULT_TENANT, type MemoryRecord, memoryScopeOf } from "./memory-rules.js";

/** Whose run it is. */
export interface RunIdentity {
  taskId: string;
  sessionId: string;
  workspaceId: string;
  agentId: string;
}

/** Event kinds of a run's memory use. */
export const MEMORY_READ_EVENT = EVENT_KIND.memoryRead;
export const MEMORY_WRITE_EVENT = EVENT_KIND.memoryWrite;

/** Most records one read returns. */
export const MAX_RUN_READ = 10;

function view(memory: MemoryRecord): RunMemoryRecord {
  return {
    id: memory.id,
    scope: memory.scope,
    ownerId: memory.ownerId,
    content: memory.content,
    provenance: memory.provenance,
    createdAt: memory.createdAt.toISOString(),
  };
}

/** The run's memory over `memories`, recording each use through `record`. */
export function createRunMemory(
  memories: Memories,
  run: RunIdentity,
  record: (item: ProgressItem) => void,
): RunMemory {
  const actor = { workspaceId: run.workspaceId, admin: false, actorId: `agent:${run.agentId}` };
  const ownerOf = (scope: string): string => {
    switch (memoryScopeOf(scope)) {
      case "persona":
        return run.agentId;
      case "session":
        return run.sessionId;
      case "workspace":
        return run.workspaceId;
      case "tenant":
        return DEFAULT_TENANT;
    }
  };
  return {
    async read({ scope, limit, toolCallId }) {
      const ownerId = ownerOf(scope);
      const count = Math.min(Math.max(limit ?? MAX_RUN_READ, 1), MAX_RUN_READ);
      const { memories: found } = await memories.list(actor, {
        scope: memoryScopeOf(scope),
        ownerId,
        pageSize: count,
        pageToken: "",
      });
      record({
        kind: MEMORY_READ_EVENT,
        data: {
          scope,
          owner_id: ownerId,
          ...(toolCallId ? { tool_call_id: toolCallId } : {}),
          // As the run got them, so a replay can give exactly these again.
          memories: found.map(memoryReadJson),
        },
      });
      return found.map(view);
    },

    async write({ scope, content, toolCallId }) {
      const ownerId = ownerOf(scope);
      const key = toolCallId ? `run:${run.taskId}:${toolCallId}` : undefined;
      const { memory } = await memories.create(actor, {
        scope: memoryScopeOf(scope),
        ownerId,
        content,
        provenance: {
          source: "run",
          task_id: run.taskId,
          session_id: run.sessionId,
          agent_id: run.agentId,
          ...(toolCallId ? { tool_call_id: toolCallId } : {}),
        },
        metadata: {},
        ...(key ? { idempotency: { key, requestHash: hashOf(content) } } : {}),
      });
      record({
        kind: MEMORY_WRITE_EVENT,
        data: {
          scope,
          owner_id: ownerId,
          ...(toolCallId ? { tool_call_id: toolCallId } : {}),
          memory_id: memory.id,
        },
      });
      return view(memory);
    },
  };
}

/** A record as a read returns it to the run (and its event records it). */
export function memoryReadJson(memory: MemoryRecord | RunMemoryRecord): JsonObject {
  const createdAt =
    memory.createdAt instanceof Date ? memory.createdAt.toISOString() : memory.createdAt;
  return {
    id: memory.id,
    content: memory.content,
    created_at: createdAt,
    provenance: memory.provenance,
  };
}

function hashOf(content: JsonValue): string {
  return createHash("sha256").update(JSON.stringify(content)).digest("hex");
}
