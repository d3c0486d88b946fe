/**
 * Memory (`/v1/memories`, Harn v1 "Memory"): durable knowledge of a persona,
 * session, workspace or the tenant, forwarded to the tasks service's
 * `MemoryService`. Kept apart from transcripts: no history read returns one.
 * Create takes `{scope, owner_id, content, provenance, metadata?}`; an
 * unknown scope is 400 and content past 64 KiB (as JSON) is 413, and neither
 * stores anything. Another workspace's record is 404. Delete answers 204.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { type Memory, MemoryScope, MemoryService } from "@trellis/contracts/tasks";
import { errors } from "@trellis/runtime";
import { storedResourceHead, toValue, valueJson } from "../../domain/harn-json.js";
import { JsonReader } from "../../domain/json-input.js";
import type { RestCall, RouteSpec } from "../context.js";
import type { RestResponse } from "../io.js";
import {
  created,
  ok,
  param,
  queryString,
  queryWorkspace,
  required,
  workspaceOf,
} from "./common.js";
import { okPage, pageOf } from "./paging.js";

const scopes = {
  persona: MemoryScope.PERSONA,
  session: MemoryScope.SESSION,
  workspace: MemoryScope.WORKSPACE,
  tenant: MemoryScope.TENANT,
} as const;
const scopeNames = Object.keys(scopes) as (keyof typeof scopes)[];

function scopeName(scope: MemoryScope): string {
  return scopeNames.find((name) => scopes[name] === scope) ?? "unspecified";
}

function memoryJson(memory: Memory): JsonObject {
  return {
    ...storedResourceHead("memory", memory),
    scope: scopeName(memory.scope),
    owner_id: memory.ownerId,
    content: valueJson(memory.content),
    provenance: memory.provenance ?? {},
    expires_at: null,
  };
}

function memories(call: RestCall) {
  return call.ports.clients.get(MemoryService);
}

/** A scope query or body field: one of the four, else 400 naming them. */
function scopeOf(value: string | undefined): MemoryScope {
  if (value === undefined || value === "") return MemoryScope.UNSPECIFIED;
  const scope = (scopes as Record<string, MemoryScope>)[value];
  if (scope === undefined) {
    throw errors.invalid(
      `unknown memory scope ${JSON.stringify(value)}; scopes: ${scopeNames.join(", ")}`,
      "scope",
    );
  }
  return scope;
}

async function listMemories(call: RestCall): Promise<RestResponse> {
  const response = await memories(call).listMemories(
    {
      workspaceId: queryWorkspace(call),
      sessionId: queryString(call, "session_id") ?? "",
      scope: scopeOf(queryString(call, "scope")),
      ownerId: queryString(call, "owner_id") ?? "",
      ...pageOf(call),
    },
    call.options(),
  );
  return okPage(response.memories, memoryJson, response.nextPageToken);
}

async function createMemory(call: RestCall): Promise<RestResponse> {
  const body = JsonReader.body(call.body);
  const scope = scopeOf(body.requiredString("scope"));
  const content = body.raw("content");
  if (content === undefined) throw errors.invalid("missing required field: content", "content");
  const metadata = body.object("metadata");
  const provenance = body.object("provenance");
  const response = await memories(call).createMemory(
    {
      workspaceId: workspaceOf(call, body.string("workspace_id")),
      scope,
      ownerId: body.string("owner_id") ?? "",
      content: toValue(content),
      ...(provenance ? { provenance } : {}),
      ...(metadata ? { metadata } : {}),
      idempotencyKey: call.idempotencyKey,
    },
    call.options(),
  );
  const memory = memoryJson(required(response.memory, "memory", ""));
  return created(memory);
}

async function getMemory(call: RestCall): Promise<RestResponse> {
  const id = param(call, "memory_id");
  const { memory } = await memories(call).getMemory({ memoryId: id }, call.options());
  return ok(memoryJson(required(memory, "memory", id)));
}

async function deleteMemory(call: RestCall): Promise<RestResponse> {
  const id = param(call, "memory_id");
  await memories(call).deleteMemory({ memoryId: id }, call.options());
  return { status: 204, body: "", headers: {} };
}

/** The memory routes (registered in `index.ts`). */
export const memoryRoutes: readonly RouteSpec[] = [
  { method: "GET", path: "/v1/memories", scope: "memory:read", handle: listMemories },
  {
    method: "POST",
    path: "/v1/memories",
    scope: "memory:write",
    write: true,
    handle: createMemory,
  },
  { method: "GET", path: "/v1/memories/{memory_id}", scope: "memory:read", handle: getMemory },
  {
    method: "DELETE",
    path: "/v1/memories/{memory_id}",
    scope: "memory:write",
    write: true,
    handle: deleteMemory,
  },
];
