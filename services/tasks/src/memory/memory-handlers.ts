/**
 * `trellis.tasks.v1.MemoryService`: proto ↔ {@link Memories}. An internal
 * call (no caller) acts as the admin in the workspace it names.
 */
import { create, fromJson, type JsonValue, toJson } from "@bufbuild/protobuf";
import { timestampFromDate, ValueSchema } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import {
  CreateMemoryRequestSchema,
  type Memory,
  MemorySchema,
  MemoryScope,
  type MemoryService,
} from "@trellis/contracts/tasks";
import { callerOf } from "@trellis/platform";
import { errors } from "@trellis/runtime";
import { idempotencyOf } from "../handlers/common.js";
import type { Memories, MemoryActor } from "./memories.js";
import type { MemoryRecord, MemoryScopeName } from "./memory-rules.js";

const scopeToProto: Record<MemoryScopeName, MemoryScope> = {
  persona: MemoryScope.PERSONA,
  session: MemoryScope.SESSION,
  workspace: MemoryScope.WORKSPACE,
  tenant: MemoryScope.TENANT,
};

/** A proto scope as a name; undefined for UNSPECIFIED. */
export function memoryScopeFromProto(scope: MemoryScope): MemoryScopeName | undefined {
  const found = Object.entries(scopeToProto).find(([, value]) => value === scope);
  if (found) return found[0] as MemoryScopeName;
  if (scope === MemoryScope.UNSPECIFIED) return undefined;
  throw errors.invalid(`unknown memory scope ${scope}`, "scope");
}

/** A record as the proto message. */
export function memoryToProto(memory: MemoryRecord): Memory {
  return create(MemorySchema, {
    id: memory.id,
    workspaceId: memory.workspaceId ?? "",
    scope: scopeToProto[memory.scope],
    ownerId: memory.ownerId,
    content: fromJson(ValueSchema, memory.content),
    provenance: memory.provenance,
    metadata: memory.metadata,
    createdAt: timestampFromDate(memory.createdAt),
    updatedAt: timestampFromDate(memory.updatedAt),
  });
}

/** Who calls, in the workspace the request names (another one only for the admin). */
function actorOf(context: HandlerContext, workspaceId: string, byId = false): MemoryActor {
  const caller = callerOf(context);
  if (!caller) {
    // An internal read or delete by id may touch any workspace's record.
    if (!workspaceId && !byId) throw errors.invalid("workspace_id is required", "workspace_id");
    return { workspaceId, admin: true, actorId: "system" };
  }
  const admin = caller.scopes.includes("*");
  if (workspaceId && workspaceId !== caller.workspaceId && !admin) {
    throw errors.notFound("workspace", workspaceId);
  }
  return { workspaceId: workspaceId || caller.workspaceId, admin, actorId: caller.actorId };
}

/** The handlers over `memories`. */
export function createMemoryHandlers(memories: Memories): ServiceImpl<typeof MemoryService> {
  return {
    async createMemory(request, context) {
      const actor = actorOf(context, request.workspaceId);
      const scope = memoryScopeFromProto(request.scope);
      if (!scope) throw errors.invalid("scope is required", "scope");
      const idempotency = idempotencyOf(CreateMemoryRequestSchema, request, request.idempotencyKey);
      const { memory, replayed } = await memories.create(actor, {
        scope,
        ownerId: request.ownerId,
        content: request.content ? (toJson(ValueSchema, request.content) as JsonValue) : undefined,
        // Who wrote it over the API is recorded beside what the caller says.
        provenance: { ...(request.provenance ?? {}), source: "api", actor_id: actor.actorId },
        metadata: request.metadata ?? {},
        ...(idempotency ? { idempotency } : {}),
      });
      return { memory: memoryToProto(memory), replayed };
    },

    async getMemory(request, context) {
      const actor = actorOf(context, "", true);
      return { memory: memoryToProto(await memories.get(actor, request.memoryId)) };
    },

    async listMemories(request, context) {
      const actor = actorOf(context, request.workspaceId);
      let scope = memoryScopeFromProto(request.scope);
      let ownerId = request.ownerId;
      if (request.sessionId) {
        if ((scope && scope !== "session") || (ownerId && ownerId !== request.sessionId)) {
          throw errors.invalid("session_id lists session memory of that session", "session_id");
        }
        scope = "session";
        ownerId = request.sessionId;
      }
      const page = await memories.list(actor, {
        ...(scope ? { scope } : {}),
        ...(ownerId ? { ownerId } : {}),
        pageSize: request.pageSize,
        pageToken: request.pageToken,
      });
      return { memories: page.memories.map(memoryToProto), nextPageToken: page.nextPageToken };
    },

    async deleteMemory(request, context) {
      const actor = actorOf(context, "", true);
      await memories.delete(actor, request.memoryId);
      return {};
    },
  };
}
