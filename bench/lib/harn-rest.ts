/**
 * The Harn REST API of a bench's `trellis dev`, called as its admin: JSON
 * calls, and the set-up steps of the stream benches (a persona that answers
 * "ok", its sessions, user messages).
 */

/** The protocol version every call names (`harn-agents-protocol-version`). */
export const HARN_VERSION = "agents-protocol-2026-04-25";

/** A client of one server. */
export interface HarnRest {
  /** A persona named `name` whose scripted graph answers every message "ok"; its id. */
  okPersona(name: string): Promise<string>;
  /** A new session of the persona; its id. */
  newSession(personaId: string): Promise<string>;
  /** Append a user message of `text` to the session. */
  appendUserText(sessionId: string, text: string): Promise<Record<string, unknown>>;
}

/** The client of the server on loopback `port`, with the admin key `apiKey`. */
export function harnRest(port: number, apiKey: string): HarnRest {
  /** A JSON call; throws with the answer's status and body when it is not 2xx. */
  async function request(method: string, path: string, body?: unknown) {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        "harn-agents-protocol-version": HARN_VERSION,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text}`);
    return JSON.parse(text) as Record<string, unknown>;
  }
  return {
    async okPersona(name) {
      const persona = await request("POST", "/v1/personas", {
        name,
        entry_workflow: "scripted",
        definition: {
          entry: "reply",
          nodes: { reply: { update: { messages: [{ role: "assistant", content: "ok" }] } } },
        },
      });
      return String(persona.id);
    },
    async newSession(personaId) {
      const session = await request("POST", "/v1/sessions", { persona_id: personaId });
      return String(session.id);
    },
    appendUserText(sessionId, text) {
      return request("POST", `/v1/sessions/${sessionId}/messages`, {
        message: { role: "user", parts: [{ type: "text", text }] },
      });
    },
  };
}
