/**
 * Workspaces and agents: the tasks store's directory. Workspaces exist
 * implicitly once used; agents are immutable, so they are cached for good
 * (in the store's context).
 */
import type { JsonValue } from "@bufbuild/protobuf";
import type { Agent, Workspace } from "@trellis/contracts/tasks";
import {
  DEFAULT_AGENT_ID,
  DEFAULT_WORKSPACE_ID,
  DETERMINISTIC_BACKENDS,
} from "../domain/defaults.js";
import { conflict, invalidRequest, notFound, permissionDenied } from "../domain/errors.js";
import { newId } from "../domain/ids.js";
import { jsonWeight, PAGE_METADATA_BUDGET } from "./bounded-metadata.js";
import { encodeRequirements, jsonText } from "./codec.js";
import { afterSeq, readPage } from "./paging.js";
import { toAgent, toWorkspace } from "./rows.js";
import { NOW, type StoreContext } from "./store-context.js";
import type { StoreParts } from "./store-parts.js";
import type {
  Idempotency,
  NewTask,
  Page,
  PageRequest,
  WorkspacePatch,
  WriteContext,
} from "./task-store.js";
import type { Tx } from "./write-unit.js";

declare module "./store-parts.js" {
  interface StoreParts {
    /** Workspaces and agents. */
    directory: Directory;
  }
}

/** Workspaces and agents (see the module header). */
export class Directory {
  readonly #ctx: StoreContext;
  readonly #p: StoreParts;

  constructor(ctx: StoreContext, parts: StoreParts) {
    this.#ctx = ctx;
    this.#p = parts;
  }

  async createWorkspace(
    workspace: Workspace,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Workspace> {
    if (context.scope !== undefined) {
      throw permissionDenied("credentials bound to a workspace cannot create workspaces");
    }
    if (!workspace.name) throw invalidRequest("a workspace needs a name", "name");
    const id = workspace.id || newId("ws");
    const created = await this.#p.unit.write(async (tx) => {
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope("", context, "CreateWorkspace", ""),
        idempotency,
        id,
      );
      if (earlier) return earlier;
      const inserted = await tx.db
        .insertInto("workspaces")
        .values({
          id,
          name: workspace.name,
          root: workspace.root,
          default_branch_id: workspace.defaultBranchId,
          default_agent_id: DEFAULT_AGENT_ID,
          metadata: jsonText(workspace.metadata),
        })
        .onConflict((oc) => oc.column("id").doNothing())
        .returning("id")
        .executeTakeFirst();
      if (!inserted) throw conflict(`workspace ${id} already exists`, { workspace_id: id });
      return id;
    });
    return this.getWorkspace(created);
  }

  async getWorkspace(id: string, scope?: string): Promise<Workspace> {
    if (scope !== undefined && id !== scope) throw notFound("workspace", id);
    const row = await this.#ctx.db
      .selectFrom("workspaces")
      .selectAll()
      .where("id", "=", id)
      .executeTakeFirst();
    if (!row) throw notFound("workspace", id);
    return toWorkspace(row);
  }

  async listWorkspaces(page: PageRequest, scope?: string): Promise<Page<Workspace>> {
    return readPage(
      page,
      (window) => {
        let query = afterSeq(this.#ctx.db.selectFrom("workspaces").selectAll(), window);
        if (scope !== undefined) query = query.where("id", "=", scope);
        return query.execute();
      },
      (r) => r.seq,
      toWorkspace,
      { weigh: (r) => jsonWeight(r.metadata), max: PAGE_METADATA_BUDGET },
    );
  }

  async updateWorkspace(
    id: string,
    patch: WorkspacePatch,
    context: WriteContext,
  ): Promise<Workspace> {
    if (context.scope !== undefined) {
      throw permissionDenied("credentials bound to a workspace cannot change workspaces");
    }
    if (patch.name !== undefined && patch.name.trim() === "") {
      throw invalidRequest("a workspace name cannot be empty", "name");
    }
    await this.#p.unit.write(async (tx) => {
      const row = await tx.db
        .selectFrom("workspaces")
        .select("metadata")
        .where("id", "=", id)
        .forUpdate()
        .executeTakeFirst();
      if (!row) throw notFound("workspace", id);
      const metadata: Record<string, JsonValue> = { ...row.metadata };
      for (const [key, value] of Object.entries(patch.metadata ?? {})) {
        if (value === null) delete metadata[key];
        else metadata[key] = value;
      }
      await tx.db
        .updateTable("workspaces")
        .set({
          ...(patch.name !== undefined ? { name: patch.name } : {}),
          metadata: jsonText(metadata),
          updated_at: NOW,
        })
        .where("id", "=", id)
        .execute();
    });
    return this.getWorkspace(id);
  }

  async archiveWorkspace(id: string, context: WriteContext): Promise<Workspace> {
    if (context.scope !== undefined) {
      throw permissionDenied("credentials bound to a workspace cannot archive workspaces");
    }
    if (id === DEFAULT_WORKSPACE_ID) {
      throw conflict("the default workspace cannot be archived", { workspace_id: id });
    }
    // Archived already: nothing changes (and an absent one is 404 below).
    await this.#ctx.db
      .updateTable("workspaces")
      .set({ archived_at: NOW, updated_at: NOW })
      .where("id", "=", id)
      .where("archived_at", "is", null)
      .execute();
    return this.getWorkspace(id);
  }

  /** An archived workspace takes no new sessions (`conflict`, naming it). */
  async refuseArchived(tx: Tx, workspaceId: string): Promise<void> {
    const row = await tx.db
      .selectFrom("workspaces")
      .select("archived_at")
      .where("id", "=", workspaceId)
      .executeTakeFirst();
    if (row?.archived_at) {
      throw conflict(`workspace ${workspaceId} is archived and takes no new sessions`, {
        workspace_id: workspaceId,
      });
    }
  }

  /** Workspaces exist implicitly once used (credentials may name a workspace nobody created). */
  async ensureWorkspace(tx: Tx, id: string): Promise<void> {
    if (this.#ctx.defaultAgentOf.has(id)) return;
    await tx.db
      .insertInto("workspaces")
      .values({ id, name: id, default_agent_id: DEFAULT_AGENT_ID, metadata: "{}" })
      .onConflict((oc) => oc.column("id").doNothing())
      .execute();
  }

  async #defaultAgentId(tx: Tx | undefined, workspaceId: string): Promise<string> {
    const cached = this.#ctx.defaultAgentOf.get(workspaceId);
    if (cached !== undefined) return cached;
    const row = await (tx?.db ?? this.#ctx.db)
      .selectFrom("workspaces")
      .select("default_agent_id")
      .where("id", "=", workspaceId)
      .executeTakeFirst();
    const id = row?.default_agent_id || DEFAULT_AGENT_ID;
    if (row) this.#ctx.defaultAgentOf.set(workspaceId, id);
    return id;
  }

  async createAgent(
    agent: Agent,
    idempotency: Idempotency | undefined,
    context: WriteContext,
  ): Promise<Agent> {
    const workspaceId = context.scope ?? (agent.workspaceId || DEFAULT_WORKSPACE_ID);
    if (context.scope !== undefined && agent.workspaceId && agent.workspaceId !== context.scope) {
      throw notFound("workspace", agent.workspaceId);
    }
    if (!agent.name) throw invalidRequest("an agent needs a name", "agent.name");
    const id = agent.id || newId("agent");
    const created = await this.#p.unit.write(async (tx) => {
      const earlier = await this.#p.unit.reserveKey(
        tx,
        this.#p.unit.keyScope(workspaceId, context, "CreateAgent", ""),
        idempotency,
        id,
      );
      if (earlier) return earlier;
      await this.ensureWorkspace(tx, workspaceId);
      const inserted = await tx.db
        .insertInto("agents")
        .values({
          id,
          workspace_id: workspaceId,
          name: agent.name,
          version: agent.version,
          description: agent.description,
          backend: agent.backend,
          tools: JSON.stringify(agent.tools),
          autonomy_tier: agent.autonomyTier,
          receipt_policy: agent.receiptPolicy,
          definition: jsonText(agent.definition),
          safe_to_retry: agent.safeToRetry,
          metadata: jsonText(agent.metadata),
        })
        // Unique per workspace: another workspace's agent of this id is no conflict.
        .onConflict((oc) => oc.columns(["workspace_id", "id"]).doNothing())
        .returning("id")
        .executeTakeFirst();
      if (!inserted) throw conflict(`agent ${id} already exists`, { agent_id: id });
      return id;
    });
    return this.getAgent(created, workspaceId);
  }

  /**
   * The agent `id` of `workspaceId`. Agent ids are unique per workspace; the
   * built-in echo agent (of the default workspace) is a system agent every
   * workspace may use unless it has an agent of that id itself.
   */
  async loadAgent(tx: Tx | undefined, id: string, workspaceId: string): Promise<Agent | undefined> {
    const key = JSON.stringify([workspaceId, id]);
    const cached = this.#ctx.agents.get(key);
    if (cached) return cached;
    const db = tx?.db ?? this.#ctx.db;
    const read = (workspace: string) =>
      db
        .selectFrom("agents")
        .selectAll()
        .where("workspace_id", "=", workspace)
        .where("id", "=", id)
        .executeTakeFirst();
    let row = await read(workspaceId);
    if (!row && id === DEFAULT_AGENT_ID && workspaceId !== DEFAULT_WORKSPACE_ID) {
      row = await read(DEFAULT_WORKSPACE_ID);
    }
    if (!row) return undefined;
    const agent = toAgent(row);
    this.#ctx.agents.set(key, agent);
    return agent;
  }

  /**
   * An agent by id for a caller bound to no workspace (admin, internal):
   * the default workspace's, else the oldest of that id.
   */
  async #anyAgent(id: string): Promise<Agent | undefined> {
    const own = await this.loadAgent(undefined, id, DEFAULT_WORKSPACE_ID);
    if (own) return own;
    const row = await this.#ctx.db
      .selectFrom("agents")
      .selectAll()
      .where("id", "=", id)
      .orderBy("seq")
      .limit(1)
      .executeTakeFirst();
    return row ? toAgent(row) : undefined;
  }

  /** The agent `id` of workspace `scope` (none: see {@link #anyAgent}). */
  async getAgent(id: string, scope?: string): Promise<Agent> {
    const agent =
      scope === undefined ? await this.#anyAgent(id) : await this.loadAgent(undefined, id, scope);
    if (!agent) throw notFound("agent", id);
    return agent;
  }

  async listAgents(workspaceId: string, page: PageRequest, scope?: string): Promise<Page<Agent>> {
    const workspace = scope ?? workspaceId;
    return readPage(
      page,
      (window) => {
        let query = afterSeq(this.#ctx.db.selectFrom("agents").selectAll(), window);
        if (workspace) {
          query = query.where((eb) =>
            eb.or([eb("workspace_id", "=", workspace), eb("id", "=", DEFAULT_AGENT_ID)]),
          );
        }
        return query.execute();
      },
      (r) => r.seq,
      toAgent,
      // Fewer agents on a page whose definitions and metadata are large (Structs on the way out).
      {
        weigh: (r) => jsonWeight(r.definition) + jsonWeight(r.metadata),
        max: PAGE_METADATA_BUDGET,
      },
    );
  }

  /** The agent a session or task in `workspaceId` runs: `agentId`, else the workspace default. */
  async resolveAgent(
    tx: Tx | undefined,
    agentId: string,
    workspaceId: string,
    param: string,
  ): Promise<Agent> {
    const id = agentId || (await this.#defaultAgentId(tx, workspaceId));
    const agent = await this.loadAgent(tx, id, workspaceId);
    if (!agent) {
      throw invalidRequest(
        `agent ${JSON.stringify(id)} does not exist in workspace ${workspaceId}`,
        param,
      );
    }
    return agent;
  }

  /**
   * The agent a submit runs (as resolveAgent) and the task's own
   * requirements, checked against it before anything is stored (a refusal
   * throws): the stored form, null when there are none.
   */
  async submitAgent(
    tx: Tx | undefined,
    agentId: string,
    workspaceId: string,
    input: Pick<NewTask, "prepareRequirements">,
  ): Promise<{ agent: Agent; requirements: Uint8Array | null }> {
    const agent = await this.resolveAgent(tx, agentId, workspaceId, "agent_id");
    return { agent, requirements: encodeRequirements(input.prepareRequirements?.(agent)) };
  }

  safeToRetry(agent: Agent): boolean {
    return agent.safeToRetry || DETERMINISTIC_BACKENDS.has(agent.backend);
  }

  workspaceFor(requested: string | undefined, context: WriteContext): string {
    if (context.scope !== undefined) {
      if (requested && requested !== context.scope) throw notFound("workspace", requested);
      return context.scope;
    }
    return requested || DEFAULT_WORKSPACE_ID;
  }
}
