/**
 * Agent policy on the public gRPC port (see `agent-policy.ts`): runs after
 * the auth interceptor (which put the caller, with its policy, in the call's
 * context) and checks the requests that name or run an agent. REST and
 * WebSocket command frames check the same in their routes.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ConnectorService, SessionService, TaskService } from "@trellis/contracts/tasks";
import { type Caller, callerKey, type ServiceClients, setCallerHeaders } from "@trellis/platform";
import {
  agentPolicyOf,
  ensureAgentAllowed,
  ensureRunAllowed,
  usableAgents,
} from "./agent-policy.js";

/** How each agent-naming method is checked: the agent it names or runs. */
type Check = (caller: Caller, message: unknown, lookup: AgentLookup) => Promise<void>;

/** The agents of things a request points at, read with the caller's own rights. */
interface AgentLookup {
  /** The session's agent ("" when it has none or is not there). */
  session(sessionId: string): Promise<string>;
  /** The task's agent ("" when it is not there). */
  task(taskId: string): Promise<string>;
  /** What a connector's deliveries run (undefined when it is not there). */
  connector(connectorId: string): Promise<{ personaId: string; sessionId: string } | undefined>;
  /**
   * The agents of the tasks waiting for the signal (none: nothing to resume);
   * with a session id, also those waiting on it as the author's label.
   */
  waitingFor(signalId: string, sessionId: string): Promise<string[]>;
}

function field(message: unknown, name: string): string {
  const value = (message as Record<string, unknown> | undefined)?.[name];
  return typeof value === "string" ? value : "";
}

/** A turn of a session: the named agent, else the session's (a new session: none). */
const turn: Check = (caller, message, lookup) =>
  ensureRunAllowed(
    caller,
    field(message, "agentId"),
    () => lookup.session(field(message, "sessionId")),
    "agent_id",
  );

/** Chat: a session that exists runs its bound agent whatever the request names. */
const chatTurn: Check = async (caller, message, lookup) => {
  const bound = await lookup.session(field(message, "sessionId"));
  if (bound !== "") return ensureAgentAllowed(caller, bound, "agent_id");
  return ensureRunAllowed(caller, field(message, "agentId"), async () => "", "agent_id");
};

/**
 * A fork (or a branch, which forks) copies the session with its agent: the
 * new session runs that agent, so the caller must be allowed it. A session
 * that is not there (or not visible) is left to the call to refuse.
 */
const forkOf: Check = async (caller, message, lookup) => {
  const sessionId = field(message, "sessionId");
  if (sessionId === "") return;
  await ensureRunAllowed(caller, "", () => lookup.session(sessionId), "session_id");
};

/** A connector's deliveries run its target persona, else its target session's agent. */
const connectorTarget = async (
  caller: Caller,
  personaId: string,
  sessionId: string,
  lookup: AgentLookup,
  param: string,
) =>
  ensureRunAllowed(
    caller,
    personaId,
    async () => (sessionId === "" ? "" : lookup.session(sessionId)),
    param,
  );

const createConnector: Check = (caller, message, lookup) =>
  connectorTarget(
    caller,
    field(message, "targetPersonaId"),
    field(message, "targetSessionId"),
    lookup,
    "target_persona_id",
  );

const deliverToConnector: Check = async (caller, message, lookup) => {
  const target = await lookup.connector(field(message, "connectorId"));
  // Not there: the delivery itself answers not found.
  if (target === undefined) return;
  await connectorTarget(caller, target.personaId, target.sessionId, lookup, "connector_id");
};

/** A replay runs the source task's agent again. */
const replay: Check = async (caller, message, lookup) => {
  const agentId = await lookup.task(field(message, "taskId"));
  // Not there: the replay itself answers not found.
  if (agentId !== "") ensureAgentAllowed(caller, agentId, "task_id");
};

/** A signal resumes the turn waiting for it, which runs that task's agent. */
const deliver: Check = async (caller, message, lookup) => {
  const waiting = await lookup.waitingFor(field(message, "signalId"), field(message, "sessionId"));
  for (const agentId of waiting) {
    ensureAgentAllowed(caller, agentId, "signal_id");
  }
};

const checks: Readonly<Record<string, Check>> = {
  "trellis.tasks.v1.AgentService/GetAgent": async (caller, message) =>
    ensureAgentAllowed(caller, field(message, "agentId"), "agent_id"),
  "trellis.tasks.v1.SessionService/CreateSession": (caller, message) =>
    ensureRunAllowed(caller, field(message, "agentId"), async () => "", "agent_id"),
  "trellis.tasks.v1.SessionService/ForkSession": forkOf,
  "trellis.tasks.v1.BranchService/CreateBranch": forkOf,
  "trellis.tasks.v1.ConnectorService/CreateConnector": createConnector,
  "trellis.tasks.v1.ConnectorService/DeliverConnectorEvent": deliverToConnector,
  "trellis.tasks.v1.TaskService/SubmitTask": turn,
  "trellis.tasks.v1.TaskService/ReplayTask": replay,
  "trellis.tasks.v1.SignalService/Deliver": deliver,
  "trellis.chat.v1.ChatService/Send": chatTurn,
  "trellis.chat.v1.ChatService/SendStreaming": chatTurn,
};

/** Methods whose answer lists agents: a restricted caller sees only its own. */
const LIST_AGENTS = "trellis.tasks.v1.AgentService/ListAgents";

/** The methods this interceptor checks (documentation and tests). */
export const agentCheckedMethods: readonly string[] = Object.keys(checks);

/** Session bindings remembered per gateway process at most (the oldest go first). */
const MAX_REMEMBERED_BINDINGS = 10_000;

/**
 * The agents sessions are bound to, as this gateway read them. A session's
 * agent is set when it is created and never changes (sessions are closed,
 * never re-bound or deleted), so a binding once read holds for good: a
 * restricted caller's next turn in the session is checked without asking
 * the tasks service again. Only bindings are remembered (a session not
 * there yet, or not bound, is asked again), per workspace: what a caller
 * sees is what its own workspace's read returned.
 */
export class SessionBindings {
  readonly #bound = new Map<string, string>();
  constructor(readonly max = MAX_REMEMBERED_BINDINGS) {}

  get(workspaceId: string, sessionId: string): string | undefined {
    return this.#bound.get(`${workspaceId}\u0000${sessionId}`);
  }

  remember(workspaceId: string, sessionId: string, agentId: string): void {
    if (agentId === "") return;
    const key = `${workspaceId}\u0000${sessionId}`;
    if (this.#bound.has(key)) return;
    if (this.#bound.size >= this.max) {
      const oldest = this.#bound.keys().next().value;
      if (oldest !== undefined) this.#bound.delete(oldest);
    }
    this.#bound.set(key, agentId);
  }

  get size(): number {
    return this.#bound.size;
  }
}

export function createAgentPolicyInterceptor(
  clients: ServiceClients,
  bindings = new SessionBindings(),
): Interceptor {
  return (next) => async (req) => {
    const caller = req.contextValues.get(callerKey);
    const policy = agentPolicyOf(caller);
    if (policy === undefined || caller === undefined) return next(req);
    const method = `${req.service.typeName}/${req.method.name}`;
    if (method === LIST_AGENTS && !req.stream) {
      const response = await next(req);
      if (!response.stream) {
        const message = response.message as { agents?: { id: string }[] };
        if (message.agents) message.agents = usableAgents(caller, message.agents);
      }
      return response;
    }
    const check = checks[method];
    if (check === undefined) return next(req);
    const lookup = agentLookup(clients, caller, bindings);
    if (!req.stream) {
      await check(caller, req.message, lookup);
      return next(req);
    }
    // A server-streaming call's one request message: checked as it is read.
    const source = req.message;
    const checked = (async function* () {
      for await (const message of source) {
        await check(caller, message, lookup);
        yield message;
      }
    })();
    return next({ ...req, message: checked });
  };
}

function agentLookup(
  clients: ServiceClients,
  caller: Caller,
  bindings: SessionBindings,
): AgentLookup {
  const options = () => {
    const headers = new Headers();
    setCallerHeaders(headers, caller);
    return { headers };
  };
  // The agent of the resource `read` finds; "" when `id` is empty or the
  // resource is not there (yet, or not visible): the request is then refused
  // downstream, or names its agent.
  const agentOf = async (id: string, read: () => Promise<{ agentId: string } | undefined>) => {
    if (id === "") return "";
    try {
      return (await read())?.agentId ?? "";
    } catch (error) {
      if (ConnectError.from(error).code === Code.NotFound) return "";
      throw error;
    }
  };
  return {
    async session(sessionId) {
      const known = bindings.get(caller.workspaceId, sessionId);
      if (known !== undefined) return known;
      const agentId = await agentOf(
        sessionId,
        async () =>
          (await clients.get(SessionService).getSession({ sessionId }, options())).session,
      );
      bindings.remember(caller.workspaceId, sessionId, agentId);
      return agentId;
    },
    task: (taskId) =>
      agentOf(
        taskId,
        async () => (await clients.get(TaskService).getTask({ taskId }, options())).task,
      ),
    async connector(connectorId) {
      if (connectorId === "") return undefined;
      try {
        const { connector } = await clients
          .get(ConnectorService)
          .getConnector({ connectorId }, options());
        return connector
          ? { personaId: connector.targetPersonaId, sessionId: connector.targetSessionId }
          : undefined;
      } catch (error) {
        if (ConnectError.from(error).code === Code.NotFound) return undefined;
        throw error;
      }
    },
    async waitingFor(signalId, sessionId) {
      if (signalId === "") return [];
      const { tasks } = await clients
        .get(TaskService)
        .listTasks({ waitingSignalId: signalId, sessionId, pageSize: 10 }, options());
      return tasks.map((task) => task.agentId);
    },
  };
}
