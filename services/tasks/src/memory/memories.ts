/**
 * Memory as callers and runs use it: who may see and write which record,
 * and which owner ids each scope accepts. Between the handlers (and the runs'
 * memory access) and the {@link MemoryStore}.
 *
 * | scope       | owner_id                           | stored under          | written by            |
 * |-------------|------------------------------------|-----------------------|-----------------------|
 * | `persona`   | an agent of the workspace          | the workspace         | the workspace         |
 * | `session`   | a session of the workspace         | the workspace         | the workspace         |
 * | `workspace` | the workspace (default)            | the workspace         | the workspace         |
 * | `tenant`    | the tenant (default `default`)     | no workspace          | an admin credential   |
 *
 * Everyone in a workspace reads its records and the tenant's; another
 * workspace's record is `resource_not_found`, never 403.
 */
import type { JsonObject, JsonValue } from "@bufbuild/protobuf";
import { errors, TrellisError } from "@trellis/runtime";
import type { TaskStore } from "../store/task-store.js";
import {
  checkMemoryContent,
  checkMemoryObject,
  DEFAULT_TENANT,
  type MemoryRecord,
  type MemoryScopeName,
} from "./memory-rules.js";
import type { MemoryStore } from "./memory-store.js";

/** Who asks: a workspace, and whether the credential is the admin's (`*`). */
export interface MemoryActor {
  workspaceId: string;
  admin: boolean;
  /** Who writes, for the provenance of a record made over the API. */
  actorId: string;
}

/** What a create asks for (validated here). */
export interface MemoryWrite {
  scope: MemoryScopeName;
  ownerId: string;
  content: JsonValue | undefined;
  provenance: JsonObject;
  metadata: JsonObject;
  idempotency?: { key: string; requestHash: string };
}

const MAX_PAGE = 100;

/** Memory records under the workspace rules above. */
export class Memories {
  constructor(
    private readonly store: MemoryStore,
    private readonly tasks: Pick<TaskStore, "getAgent" | "getSession">,
  ) {}

  /** The owner id a scope takes in `workspaceId` (checked to exist there). */
  async ownerOf(scope: MemoryScopeName, ownerId: string, workspaceId: string): Promise<string> {
    switch (scope) {
      case "workspace":
        if (ownerId && ownerId !== workspaceId) {
          throw errors.invalid("a workspace memory's owner_id is its workspace", "owner_id");
        }
        return workspaceId;
      case "tenant":
        return ownerId || DEFAULT_TENANT;
      case "session":
        if (!ownerId) throw errors.invalid("a session memory needs owner_id", "owner_id");
        await this.tasks.getSession(ownerId, workspaceId);
        return ownerId;
      case "persona":
        if (!ownerId) throw errors.invalid("a persona memory needs owner_id", "owner_id");
        await this.tasks.getAgent(ownerId, workspaceId);
        return ownerId;
    }
  }

  /** Validates and stores a record; nothing is stored when a rule is broken. */
  async create(
    actor: MemoryActor,
    write: MemoryWrite,
  ): Promise<{ memory: MemoryRecord; replayed: boolean }> {
    const content = checkMemoryContent(write.content);
    const provenance = checkMemoryObject(write.provenance, "provenance");
    const metadata = checkMemoryObject(write.metadata, "metadata");
    if (write.scope === "tenant" && !actor.admin) {
      throw new TrellisError({
        reason: "permission_denied",
        message: "tenant memory is written with an admin credential only",
        param: "scope",
      });
    }
    const ownerId = await this.ownerOf(write.scope, write.ownerId, actor.workspaceId);
    return this.store.create({
      workspaceId: write.scope === "tenant" ? null : actor.workspaceId,
      scope: write.scope,
      ownerId,
      content,
      provenance,
      metadata,
      ...(write.idempotency ? { idempotency: write.idempotency } : {}),
    });
  }

  /** The record when `actor` may see it, else `resource_not_found`. */
  async get(actor: MemoryActor, id: string): Promise<MemoryRecord> {
    const memory = id ? await this.store.get(id) : undefined;
    if (
      !memory ||
      (memory.workspaceId !== null && memory.workspaceId !== actor.workspaceId && !actor.admin)
    ) {
      throw errors.notFound("memory", id);
    }
    return memory;
  }

  /** A page, newest first; the token is the last id of the page. */
  async list(
    actor: MemoryActor,
    filter: { scope?: MemoryScopeName; ownerId?: string; pageSize: number; pageToken: string },
  ): Promise<{ memories: MemoryRecord[]; nextPageToken: string }> {
    const limit = Math.min(Math.max(filter.pageSize || 50, 1), MAX_PAGE);
    const rows = await this.store.list({
      workspaceId: actor.workspaceId,
      ...(filter.scope ? { scope: filter.scope } : {}),
      ...(filter.ownerId ? { ownerId: filter.ownerId } : {}),
      ...(filter.pageToken ? { before: filter.pageToken } : {}),
      limit: limit + 1,
    });
    const page = rows.slice(0, limit);
    return {
      memories: page,
      nextPageToken: rows.length > limit ? (page.at(-1)?.id ?? "") : "",
    };
  }

  async delete(actor: MemoryActor, id: string): Promise<void> {
    const memory = await this.get(actor, id);
    if (memory.workspaceId === null && !actor.admin) {
      throw new TrellisError({
        reason: "permission_denied",
        message: "tenant memory is deleted with an admin credential only",
      });
    }
    if (!(await this.store.delete(memory.id))) throw errors.notFound("memory", id);
  }
}
