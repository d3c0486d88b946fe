// The A2A backend against a remote agent built with @a2a-js/sdk (testkit):
// a turn completes and streams, the credential comes from a vault grant,
// input-required suspends and resumes on the same remote task, cancel reaches
// the remote agent (which confirms), negotiation follows the card, and
// private targets need the explicit allowance.
import type { JsonObject } from "@bufbuild/protobuf";
import type { ExecutionEvent, ExecutionRequest, VaultGrant } from "@trellis/adapter-sdk";
import type { Message } from "@trellis/contracts/core";
import { chatToMessage } from "@trellis/messages";
import { type A2aTestAgent, startA2aTestAgent } from "@trellis/testkit/a2a-server";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createA2aAdapter } from "../src/a2a/a2a-adapter.js";

const TOKEN = "remote-agent-token";

function grants(token = TOKEN): ReadonlyMap<string, VaultGrant> {
  return new Map([["vault_a2a", { allowed: true, secrets: new Map([["token", token]]) }]]);
}

function request(
  definition: JsonObject,
  text: string,
  extra: Partial<ExecutionRequest> = {},
): ExecutionRequest & { events: ExecutionEvent[] } {
  const events: ExecutionEvent[] = [];
  return {
    taskId: `task_${Math.random().toString(36).slice(2)}`,
    sessionId: "ses_a2a",
    workspaceId: "default",
    agent: { id: "agent_remote", backend: "a2a", definition, tools: [] },
    history: [],
    input: chatToMessage({ role: "user", content: text }),
    signal: new AbortController().signal,
    onEvent: (event) => events.push(event),
    events,
    ...extra,
  };
}

function textOf(message: Message | undefined): string {
  return (message?.parts ?? [])
    .map((p) => (p.kind.case === "text" ? p.kind.value.text : ""))
    .join("");
}

describe("A2A backend", () => {
  let streaming: A2aTestAgent;
  let blocking: A2aTestAgent;

  beforeAll(async () => {
    streaming = await startA2aTestAgent({ token: TOKEN });
    blocking = await startA2aTestAgent({ token: TOKEN, streaming: false });
  });

  afterAll(async () => {
    await streaming?.close();
    await blocking?.close();
  });

  const adapter = createA2aAdapter({ allowPrivate: true, vaults: async () => grants() });
  const definitionOf = (agent: A2aTestAgent) => ({
    card_url: agent.cardUrl,
    credential: "vault_a2a/token",
  });

  it("completes a turn, streaming the reply, with the vault credential", async () => {
    const run = request(definitionOf(streaming), "hello there");
    const result = await adapter.execute(run);
    expect(result.status).toBe("completed");
    if (result.status !== "completed") return;
    expect(textOf(result.messages[0])).toBe("Echo: hello there");
    const deltas = run.events.flatMap((e) => (e.kind === "text_delta" ? [e.text] : []));
    expect(deltas.length).toBeGreaterThan(2);
    expect(deltas.join("")).toBe("Echo: hello there");
    // The remote task id: in the tool use (events, receipt) and the reply's metadata.
    const started = run.events.find((e) => e.kind === "tool_started");
    expect(started?.kind === "tool_started" && started.toolCallId).toMatch(/^a2a:.+/);
    const remoteId = (result.messages[0]?.metadata?.a2a as JsonObject | undefined)?.task_id;
    expect(started?.kind === "tool_started" && started.toolCallId).toBe(`a2a:${remoteId}`);
    expect(run.events.some((e) => e.kind === "tool_finished" && e.status === "ok")).toBe(true);
    expect(streaming.authorizations.at(-1)).toBe(`Bearer ${TOKEN}`);
    expect(typeof result.state?.a2a_context_id).toBe("string");
  });

  it("keeps one remote context per session (the state carries it)", async () => {
    const first = await adapter.execute(request(definitionOf(streaming), "one"));
    const second = await adapter.execute(
      request(definitionOf(streaming), "two", { ...(first.state ? { state: first.state } : {}) }),
    );
    expect(second.state?.a2a_context_id).toBe(first.state?.a2a_context_id);
  });

  it("suspends on input-required and resumes the same remote task", async () => {
    const first = await adapter.execute(request(definitionOf(streaming), "ask the weather"));
    expect(first.status).toBe("suspended");
    if (first.status !== "suspended") return;
    expect(first.kind).toBe("input");
    expect(first.metadata.question).toBe("Which city?");
    const resumed = await adapter.execute(
      request(definitionOf(streaming), "ask the weather", {
        resume: {
          checkpoint: first.checkpoint,
          payload: { kind: "input", message: { parts: [{ text: { text: "Lyon" } }] } },
        },
      }),
    );
    expect(resumed.status).toBe("completed");
    if (resumed.status !== "completed") return;
    expect(textOf(resumed.messages[0])).toBe("Forecast for Lyon: sunny");
    expect((resumed.messages[0]?.metadata?.a2a as JsonObject | undefined)?.task_id).toBe(
      (first.checkpoint as JsonObject).task_id,
    );
  });

  it("propagates a cancel, and the remote agent confirms", async () => {
    const controller = new AbortController();
    const run = request(definitionOf(streaming), "slow work", { signal: controller.signal });
    const pending = adapter.execute(run);
    for (let i = 0; i < 100 && !run.events.some((e) => e.kind === "tool_started"); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    controller.abort();
    const result = await pending;
    expect(result.status).toBe("cancelled");
    const started = run.events.find((e) => e.kind === "tool_started");
    const remoteId = started?.kind === "tool_started" ? started.toolCallId.slice(4) : "";
    expect(streaming.canceled).toContain(remoteId);
    expect(run.events.some((e) => e.kind === "tool_finished" && e.status === "ok")).toBe(true);
  });

  it("negotiates from the card: streaming required is refused by a card without it", async () => {
    const definition = definitionOf(blocking);
    const wanting = request(definition, "hello", { requirements: { streaming: "required" } });
    // Before the card is read the run checks it; after, negotiation itself refuses.
    const refused = await adapter.execute(wanting);
    expect(refused.status).toBe("failed");
    if (refused.status !== "failed") return;
    expect(refused.category).toBe("unsupported");
    expect(refused.reasons?.some((r) => r.code === "streaming_unsupported")).toBe(true);
    const negotiation = adapter.negotiate?.(wanting);
    expect(negotiation?.supported).toBe(false);
    expect(negotiation?.effectiveCapabilities.streaming).toBe("none");
    // Preferred: it runs, degraded, through the blocking call.
    const preferring = request(definition, "hello", { requirements: { streaming: "preferred" } });
    const degraded = await adapter.execute(preferring);
    expect(degraded.status).toBe("completed");
    if (degraded.status !== "completed") return;
    expect(textOf(degraded.messages[0])).toBe("Echo: hello");
    expect(degraded.degradation?.some((r) => r.code === "streaming_unsupported")).toBe(true);
    expect(preferring.events.some((e) => e.kind === "text_delta")).toBe(false);
    // Attachments: the card takes text and JSON only.
    const file = request(definition, "x", {
      input: {
        ...chatToMessage({ role: "user", content: "see file" }),
        parts: [
          ...chatToMessage({ role: "user", content: "see file" }).parts,
          {
            $typeName: "trellis.core.v1.Part",
            visibility: 0,
            kind: {
              case: "fileRef",
              value: {
                $typeName: "trellis.core.v1.FileRefPart",
                uri: "https://x.example/a.pdf",
                mimeType: "application/pdf",
              },
            },
          },
        ],
      },
    });
    expect(adapter.negotiate?.(file).supported).toBe(false);
  });

  it("fails on a missing or refused credential, naming it", async () => {
    const noSecret = createA2aAdapter({ allowPrivate: true, vaults: async () => new Map() });
    const result = await noSecret.execute(request(definitionOf(streaming), "hi"));
    expect(result.status).toBe("failed");
    if (result.status === "failed") {
      expect(result.category).toBe("secret_denied");
      expect(result.message).toMatch(/vault_a2a/);
    }
    const wrong = createA2aAdapter({ allowPrivate: true, vaults: async () => grants("wrong") });
    const refused = await wrong.execute(request(definitionOf(streaming), "hi"));
    expect(refused.status).toBe("failed");
  });

  it("refuses a loopback agent unless private targets are allowed", async () => {
    const strict = createA2aAdapter({ vaults: async () => grants() });
    const result = await strict.execute(request(definitionOf(streaming), "hi"));
    expect(result.status).toBe("failed");
    if (result.status === "failed") {
      expect(result.category).toBe("permission_denied");
      expect(result.message).toMatch(/TRELLIS_A2A_ALLOW_PRIVATE/);
    }
    expect(() => strict.validateDefinition?.({ card_url: "ftp://x/card" })).toThrow(/card_url/);
    expect(() =>
      strict.validateDefinition?.({ card_url: "https://x.example/c", extra: 1 }),
    ).toThrow(/extra/);
  });
});
