/**
 * Agent policy on the public gRPC port (see `agent-policy.ts`): runs after
 * the auth interceptor (which put the caller, with its policy, in the call's
 * context) and checks the requests that name or run an agent. REST and
 * WebSocket command frames check the same in their routes.
 */
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { SessionService } from "@trellis/contracts/tasks";
import { type Caller, callerKey, type ServiceClients, setCallerHeaders } from "@trellis/platform";
import { agentPolicyOf, ensureAgentAllowed, ensureRunAllowed } from "./agent-policy.js";

/** How each agent-naming method is checked: the agent it names or runs. */
type Check = (caller: Caller, message: unknown, sessionAgent: SessionAgent) => Promise<void>;
type SessionAgent = (sessionId: string) => Promise<string>;

function field(message: unknown, name: string): string {
  const value = (message as Record<string, unknown> | undefined)?.[name];
  return typeof value === "string" ? value : "";
}

/** A turn of a session: the named agent, else the session's (a new session: none). */
const turn: Check = (caller, message, sessionAgent) =>
  ensureRunAllowed(
    caller,
    field(message, "agentId"),
    () => sessionAgent(field(message, "sessionId")),
    "agent_id",
  );

/** Chat: a session that exists runs its bound agent whatever the request names. */
const chatTurn: Check = async (caller, message, sessionAgent) => {
  const bound = await sessionAgent(field(message, "sessionId"));
  if (bound !== "") return ensureAgentAllowed(caller, bound, "agent_id");
  return ensureRunAllowed(caller, field(message, "agentId"), async () => "", "agent_id");
};

const checks: Readonly<Record<string, Check>> = {
  "trellis.tasks.v1.AgentService/GetAgent": async (caller, message) =>
    ensureAgentAllowed(caller, field(message, "agentId"), "agent_id"),
  "trellis.tasks.v1.SessionService/CreateSession": (caller, message) =>
    ensureRunAllowed(caller, field(message, "agentId"), async () => "", "agent_id"),
  "trellis.tasks.v1.TaskService/SubmitTask": turn,
  "trellis.chat.v1.ChatService/Send": chatTurn,
  "trellis.chat.v1.ChatService/SendStreaming": chatTurn,
};

/** The methods this interceptor checks (documentation and tests). */
export const agentCheckedMethods: readonly string[] = Object.keys(checks);

export function createAgentPolicyInterceptor(clients: ServiceClients): Interceptor {
  return (next) => async (req) => {
    const caller = req.contextValues.get(callerKey);
    if (agentPolicyOf(caller) === undefined) return next(req);
    const check = checks[`${req.service.typeName}/${req.method.name}`];
    if (check === undefined || caller === undefined) return next(req);
    const sessionAgent: SessionAgent = async (sessionId) => {
      if (sessionId === "") return "";
      const headers = new Headers();
      setCallerHeaders(headers, caller);
      try {
        const { session } = await clients
          .get(SessionService)
          .getSession({ sessionId }, { headers });
        return session?.agentId ?? "";
      } catch (error) {
        // Not there (yet, or not visible): the request names the agent, or is refused downstream.
        if (ConnectError.from(error).code === Code.NotFound) return "";
        throw error;
      }
    };
    if (!req.stream) {
      await check(caller, req.message, sessionAgent);
      return next(req);
    }
    // A server-streaming call's one request message: checked as it is read.
    const source = req.message;
    const checked = (async function* () {
      for await (const message of source) {
        await check(caller, message, sessionAgent);
        yield message;
      }
    })();
    return next({ ...req, message: checked });
  };
}
