/**
 * What the receipts service asks the tasks service: which agent ran a task,
 * that agent's autonomy tier, backend and receipt policy, and the
 * workspace's receipt policy (`metadata.receipt_policy`).
 *
 * Events rarely carry the agent: an agent's own messages name it as their
 * AGENT actor; otherwise `TaskService.GetTask` says. Answers are cached
 * (30 s), and a tasks service that does not answer (not deployed, not
 * serving these RPCs, down) is left alone for 5 s: receipts are then built
 * with defaults (policy `required`, tier `suggest`) rather than held back,
 * and `metadata.trellis.agent_known` says so.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  type Agent,
  AgentService,
  AutonomyTier,
  TaskService,
  WorkspaceService,
} from "@trellis/contracts/tasks";
import { type ServiceClients, setCallerHeaders } from "@trellis/platform";
import type { Logger } from "@trellis/runtime";
import { type AgentProfile, isDeterministicBackend } from "./domain/build.js";
import { parsePolicyName, policyName, type ReceiptPolicyName } from "./domain/policy.js";
import type { BudgetAmount, TrustTier } from "./domain/receipt.js";

/** An agent as receipts see it, with its own receipt policy. */
export interface AgentFacts {
  profile: AgentProfile;
  policy?: ReceiptPolicyName;
  /** False when the agent could not be read (defaults apply). */
  known: boolean;
}

/** Workspace facts receipts use. */
export interface WorkspaceFacts {
  policy?: ReceiptPolicyName;
  tenantId?: string;
}

/** Port: where agent and workspace facts come from. */
export interface AgentDirectory {
  /** The agent of a task (`agentId` when an event named it). */
  agentOfTask(
    taskId: string,
    agentId: string | undefined,
    /** The task's workspace: agent ids are unique per workspace only. */
    workspaceId?: string,
  ): Promise<AgentFacts>;
  workspace(workspaceId: string): Promise<WorkspaceFacts>;
}

const TIERS: Partial<Record<AutonomyTier, TrustTier>> = {
  [AutonomyTier.SHADOW]: "shadow",
  [AutonomyTier.SUGGEST]: "suggest",
  [AutonomyTier.ACT_WITH_APPROVAL]: "act_with_approval",
  [AutonomyTier.ACT_AUTO]: "act_auto",
};

/** Backends whose runs replay byte for byte. */

function budgetOf(metadata: JsonObject | undefined): BudgetAmount | undefined {
  const raw = metadata?.autonomy_budget;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) return undefined;
  const out: BudgetAmount = {};
  for (const key of [
    "usd",
    "input_tokens",
    "output_tokens",
    "tool_calls",
    "wall_time_ms",
  ] as const) {
    const value = raw[key];
    if (typeof value !== "number" || !Number.isFinite(value) || value < 0) continue;
    out[key] = key === "usd" ? value : Math.floor(value);
  }
  return Object.keys(out).length ? out : undefined;
}

/** Agent facts of a proto Agent. */
export function agentFacts(agent: Agent): AgentFacts {
  const tier = TIERS[agent.autonomyTier];
  const budget = budgetOf(agent.metadata);
  const policy = policyName(agent.receiptPolicy);
  return {
    known: true,
    ...(policy ? { policy } : {}),
    profile: {
      agentId: agent.id,
      ...(agent.name ? { name: agent.name } : {}),
      ...(agent.version ? { version: agent.version } : {}),
      ...(agent.backend ? { backend: agent.backend } : {}),
      ...(tier ? { tier } : {}),
      ...(budget ? { budgetLimit: budget } : {}),
      deterministic: isDeterministicBackend(agent.backend),
    },
  };
}

interface Cached<T> {
  value: T;
  until: number;
}

const TTL_MS = 30_000;
const BACKOFF_MS = 5_000;
const CALL_TIMEOUT_MS = 2_000;

/** Options of {@link createAgentDirectory}. */
export interface AgentDirectoryOptions {
  clients: ServiceClients;
  logger: Logger;
  now?: () => number;
}

/** An {@link AgentDirectory} over the tasks service's RPCs. */
export function createAgentDirectory(options: AgentDirectoryOptions): AgentDirectory {
  const now = options.now ?? Date.now;
  const agents = new Map<string, Cached<AgentFacts>>();
  const workspaces = new Map<string, Cached<WorkspaceFacts>>();
  const taskAgents = new Map<string, string>();
  let downUntil = 0;

  /** Calls the tasks service; undefined when it does not answer usefully. */
  async function call<T>(what: string, fn: () => Promise<T>): Promise<T | undefined> {
    if (now() < downUntil) return undefined;
    try {
      return await fn();
    } catch (error) {
      const code = error instanceof ConnectError ? error.code : Code.Unknown;
      if (code === Code.NotFound) return undefined;
      if (
        code === Code.Unavailable ||
        code === Code.Unimplemented ||
        code === Code.DeadlineExceeded ||
        code === Code.Unknown ||
        code === Code.Internal
      ) {
        downUntil = now() + BACKOFF_MS;
      }
      options.logger.debug(`receipts: ${what} failed; using defaults`, {
        error: error instanceof Error ? error.message : String(error),
      });
      return undefined;
    }
  }

  const unknown = (agentId?: string): AgentFacts => ({
    known: false,
    profile: agentId ? { agentId } : {},
  });

  return {
    async agentOfTask(taskId, agentId, workspaceId) {
      let id = agentId ?? taskAgents.get(taskId);
      if (!id) {
        const response = await call("GetTask", () =>
          options.clients.get(TaskService).getTask({ taskId }, { timeoutMs: CALL_TIMEOUT_MS }),
        );
        id = response?.task?.agentId || undefined;
      }
      if (!id) return unknown();
      taskAgents.set(taskId, id);
      if (taskAgents.size > 10_000) taskAgents.clear();
      // Agent ids are unique per workspace: looked up (and cached) in the task's.
      const key = JSON.stringify([workspaceId ?? "", id]);
      const cached = agents.get(key);
      if (cached && cached.until > now()) return cached.value;
      const headers = new Headers();
      if (workspaceId) {
        setCallerHeaders(headers, { actorId: "receipts", workspaceId, scopes: [] });
      }
      const lookup = { agentId: id };
      const response = await call("GetAgent", () =>
        options.clients.get(AgentService).getAgent(lookup, { timeoutMs: CALL_TIMEOUT_MS, headers }),
      );
      const facts = response?.agent ? agentFacts(response.agent) : unknown(id);
      agents.set(key, { value: facts, until: now() + (facts.known ? TTL_MS : BACKOFF_MS) });
      return facts;
    },
    async workspace(workspaceId) {
      const cached = workspaces.get(workspaceId);
      if (cached && cached.until > now()) return cached.value;
      const response = await call("GetWorkspace", () =>
        options.clients
          .get(WorkspaceService)
          .getWorkspace({ workspaceId }, { timeoutMs: CALL_TIMEOUT_MS }),
      );
      const metadata = response?.workspace?.metadata;
      const policy = parsePolicyName(metadata?.receipt_policy);
      const tenant = metadata?.tenant_id;
      const facts: WorkspaceFacts = {
        ...(policy ? { policy } : {}),
        ...(typeof tenant === "string" && tenant ? { tenantId: tenant } : {}),
      };
      workspaces.set(workspaceId, {
        value: facts,
        until: now() + (response ? TTL_MS : BACKOFF_MS),
      });
      return facts;
    },
  };
}
