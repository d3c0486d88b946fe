// The agent policy of a restricted credential on the gRPC port: a chat turn
// in a session is checked against the agent the session is bound to. That
// binding never changes, so the gateway reads it once per session (and
// workspace), not on every turn: one GetSession RPC less per turn after the
// first. A session not bound yet (or not there) is asked again.
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { ChatService } from "@trellis/contracts/chat";
import { SessionService } from "@trellis/contracts/tasks";
import { type Caller, callerKey, type ServiceClients } from "@trellis/platform";
import { describe, expect, it } from "vitest";
import { attachAgentPolicy } from "../src/policy/agent-policy.js";
import { createAgentPolicyInterceptor, SessionBindings } from "../src/policy/grpc.js";

/** Service clients whose SessionService.GetSession answers from `sessions`, counting calls. */
function fakeClients(sessions: Map<string, string>) {
  const calls: string[] = [];
  const clients = {
    get(service: unknown) {
      if (service !== SessionService) throw new Error("only SessionService is expected");
      return {
        async getSession({ sessionId }: { sessionId: string }) {
          calls.push(sessionId);
          const agentId = sessions.get(sessionId);
          if (agentId === undefined) throw new ConnectError("no such session", Code.NotFound);
          return { session: { id: sessionId, agentId } };
        },
      };
    },
  } as unknown as ServiceClients;
  return { clients, calls };
}

function restricted(workspaceId: string, agentIds: string[]): Caller {
  const caller: Caller = { actorId: "bot", workspaceId, scopes: ["tasks:write"] };
  attachAgentPolicy(caller, { agentIds });
  return caller;
}

/** One ChatService.Send through the interceptor; resolves when it reached the service. */
async function send(interceptor: Interceptor, caller: Caller, sessionId: string, agentId = "") {
  let forwarded = false;
  const handler = interceptor(async () => {
    forwarded = true;
    return {} as never;
  });
  const contextValues = { get: (key: unknown) => (key === callerKey ? caller : undefined) };
  await handler({
    stream: false,
    service: ChatService,
    method: ChatService.method.send,
    message: { sessionId, agentId },
    contextValues,
  } as never);
  return forwarded;
}

describe("session bindings in the agent policy check", () => {
  it("asks the tasks service once per bound session, whatever the number of turns", async () => {
    const { clients, calls } = fakeClients(new Map([["ses_1", "agent_a"]]));
    const interceptor = createAgentPolicyInterceptor(clients);
    const caller = restricted("ws_1", ["agent_a"]);
    for (let turn = 0; turn < 5; turn++)
      expect(await send(interceptor, caller, "ses_1")).toBe(true);
    expect(calls).toEqual(["ses_1"]);
  });

  it("still refuses a session bound to an agent the credential may not use, every time", async () => {
    const { clients, calls } = fakeClients(new Map([["ses_b", "agent_b"]]));
    const interceptor = createAgentPolicyInterceptor(clients);
    const caller = restricted("ws_1", ["agent_a"]);
    for (let turn = 0; turn < 3; turn++) {
      await expect(send(interceptor, caller, "ses_b", "agent_a")).rejects.toMatchObject({
        reason: "permission_denied",
      });
    }
    expect(calls).toEqual(["ses_b"]);
  });

  it("asks again while a session is not there, and remembers it once bound", async () => {
    const sessions = new Map<string, string>();
    const { clients, calls } = fakeClients(sessions);
    const interceptor = createAgentPolicyInterceptor(clients);
    const caller = restricted("ws_1", ["agent_a"]);
    // A new session: the turn names its agent (allowed), the tasks service binds it.
    expect(await send(interceptor, caller, "ses_new", "agent_a")).toBe(true);
    sessions.set("ses_new", "agent_a");
    expect(await send(interceptor, caller, "ses_new")).toBe(true);
    expect(await send(interceptor, caller, "ses_new")).toBe(true);
    expect(calls).toEqual(["ses_new", "ses_new"]);
  });

  it("keeps bindings apart per workspace and forgets the oldest past its bound", async () => {
    const { clients, calls } = fakeClients(new Map([["ses_1", "agent_a"]]));
    const bindings = new SessionBindings(2);
    const interceptor = createAgentPolicyInterceptor(clients, bindings);
    await send(interceptor, restricted("ws_1", ["agent_a"]), "ses_1");
    await send(interceptor, restricted("ws_2", ["agent_a"]), "ses_1");
    expect(calls).toEqual(["ses_1", "ses_1"]);
    bindings.remember("ws_3", "ses_9", "agent_a");
    expect(bindings.size).toBe(2);
    expect(bindings.get("ws_1", "ses_1")).toBeUndefined();
    expect(bindings.get("ws_2", "ses_1")).toBe("agent_a");
  });
});
