/**
 * Steps every flow shares, written as an outside client takes them: create a
 * workspace first, then work in it.
 */
import { waitGraph } from "@trellis/gateway/testing";
import { expect } from "vitest";
import { type HarnClient, type Json, poll, type Reply } from "./client.js";

export const TERMINAL = new Set(["COMPLETED", "FAILED", "CANCELED"]);

/** The Harn error envelope with `code` and the given status. */
export function expectError(reply: Reply, status: number, code: string): void {
  expect(reply.status, reply.text).toBe(status);
  expect(Object.keys(reply.json ?? {})).toEqual(["error"]);
  expect(reply.json.error).toMatchObject({ code });
  for (const field of ["message", "type", "param", "request_id", "details"]) {
    expect(reply.json.error).toHaveProperty(field);
  }
  expect(reply.json.error.request_id).toBe(reply.headers.get("x-request-id"));
}

/** A new workspace, made by `api` (the admin key); its id. */
export async function newWorkspace(api: HarnClient, name: string): Promise<string> {
  const reply = await api.post("/v1/workspaces", { name, root: `/conformance/${name}` });
  expect(reply.status, reply.text).toBe(201);
  expect(reply.json).toMatchObject({ object: "workspace", name });
  expect(reply.json.id).toEqual(expect.any(String));
  return reply.json.id;
}

/** A new session in `workspaceId` (optionally of a persona); its id. */
export async function newSession(
  api: HarnClient,
  workspaceId: string,
  personaId?: string,
): Promise<string> {
  const reply = await api.post("/v1/sessions", {
    workspace_id: workspaceId,
    ...(personaId ? { persona_id: personaId } : {}),
  });
  expect(reply.status, reply.text).toBe(201);
  expect(reply.json).toMatchObject({ object: "session", workspace_id: workspaceId });
  return reply.json.id;
}

/** A user message as task input. */
export function textInput(text: string): Json {
  return { role: "user", parts: [{ type: "text", text }] };
}

/** Submit a task to a session: the accepted task. */
export async function submit(api: HarnClient, sessionId: string, text: string): Promise<Json> {
  const reply = await api.post(`/v1/sessions/${sessionId}/tasks`, { input: textInput(text) });
  expect(reply.status, reply.text).toBe(202);
  expect(reply.json).toMatchObject({ object: "task", session_id: sessionId });
  return reply.json;
}

/** Poll a task until `until` holds; every status seen is appended to `seen`. */
export async function waitTask(
  api: HarnClient,
  taskId: string,
  until: (task: Json) => boolean = (t) => TERMINAL.has(t.status),
  seen: string[] = [],
): Promise<Json> {
  return poll(`task ${taskId}`, async () => {
    const reply = await api.get(`/v1/tasks/${taskId}`);
    expect(reply.status, reply.text).toBe(200);
    if (seen.at(-1) !== reply.json.status) seen.push(reply.json.status);
    return until(reply.json) ? reply.json : undefined;
  });
}

/**
 * A persona in `workspaceId` running a scripted graph: `slow` stays WORKING
 * for a minute, `asker` waits for input, then answers.
 */
export async function newPersona(
  api: HarnClient,
  workspaceId: string,
  kind: "slow" | "asker",
): Promise<string> {
  const definition =
    kind === "slow"
      ? {
          entry: "think",
          nodes: {
            think: {
              update: { messages: [{ role: "assistant", content: "late" }], delay_ms: 60_000 },
            },
          },
          edges: [{ from: "think", to: "END" }],
        }
      : waitGraph;
  const reply = await api.post("/v1/personas", {
    workspace_id: workspaceId,
    name: kind,
    version: "1",
    entry_workflow: "scripted",
    autonomy_tier: "act_auto",
    definition,
  });
  expect(reply.status, reply.text).toBe(201);
  return reply.json.id;
}

/** An API key of `workspaceId` with `scopes`, made by the admin key. */
export async function newKey(
  api: HarnClient,
  workspaceId: string,
  scopes: string[],
): Promise<string> {
  const reply = await api.post("/v1/api-keys", {
    workspace_id: workspaceId,
    name: `conformance-${scopes.join("-").replaceAll(":", "_")}`.slice(0, 100),
    scopes,
  });
  expect(reply.status, reply.text).toBe(201);
  expect(reply.json.workspace_id).toBe(workspaceId);
  return reply.json.key;
}
