// A2A against `trellis dev` as `npm start` runs it: the official
// @a2a-js/sdk client, given only the default agent's card URL and an API key,
// sends a message and gets the reply, streams a turn, and resumes an
// input-required turn of a gated agent with a second message.
import { randomUUID } from "node:crypto";
import { type Message, type StreamResponse, TaskState } from "@a2a-js/sdk";
import { a2aClient, a2aText, a2aTextMessage, asA2aTask } from "@trellis/testkit/a2a-client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTrellisDev, type TrellisDev } from "./support/trellis-dev.js";

const KEY = `trellis-a2a-dev-${randomUUID()}`;

const send = (m: Message) => ({
  tenant: "",
  message: m,
  configuration: undefined,
  metadata: undefined,
});

describe("A2A on trellis dev", () => {
  let dev: TrellisDev;

  beforeAll(async () => {
    dev = await startTrellisDev({ TRELLIS_API_KEY: KEY, TRELLIS_LOG_LEVEL: "warn" });
  }, 90_000);

  afterAll(async () => {
    await dev?.stop();
  });

  it("sends, streams, and resumes an input-required turn", async () => {
    const client = await a2aClient(`${dev.url}/.well-known/agent-card.json`, KEY);
    const reply = asA2aTask(await client.sendMessage(send(a2aTextMessage("hello from A2A"))));
    expect(reply.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(a2aText(reply.status?.message)).toBe("hello from A2A");

    const events: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(send(a2aTextMessage("streamed")))) {
      events.push(event);
    }
    expect(events[0]?.payload?.$case).toBe("task");
    const last = events.at(-1)?.payload;
    expect(last?.$case === "statusUpdate" && last.value.status?.state).toBe(
      TaskState.TASK_STATE_COMPLETED,
    );
    expect(
      events.some(
        (e) =>
          e.payload?.$case === "artifactUpdate" &&
          a2aText({ parts: e.payload.value.artifact?.parts ?? [] } as unknown as Message) ===
            "streamed",
      ),
    ).toBe(true);

    // A gated agent, made over REST with the same key.
    const persona = await fetch(`${dev.url}/v1/personas`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${KEY}`,
        "content-type": "application/json",
        "harn-agents-protocol-version": "agents-protocol-2026-04-25",
      },
      body: JSON.stringify({
        name: "gated",
        entry_workflow: "scripted",
        definition: {
          entry: "ask",
          nodes: {
            ask: { update: { messages: [{ role: "assistant", content: "May I?" }] } },
            gate: { suspend: { signal_id: "approval", metadata: { kind: "approval" } } },
            yes: { update: { messages: [{ role: "assistant", content: "Done." }] } },
            no: { update: { messages: [{ role: "assistant", content: "Not done." }] } },
          },
          edges: [
            { from: "ask", to: "gate" },
            { from: "gate", to: "yes", when: { path: "approved", equals: true } },
            { from: "gate", to: "no" },
            { from: "yes", to: "END" },
            { from: "no", to: "END" },
          ],
        },
      }),
    });
    expect(persona.status).toBe(201);
    const { id } = (await persona.json()) as { id: string };
    const gated = await a2aClient(`${dev.url}/a2a/${id}/.well-known/agent-card.json`, KEY);
    const waiting = asA2aTask(await gated.sendMessage(send(a2aTextMessage("please"))));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const done = asA2aTask(
      await gated.sendMessage(
        send(a2aTextMessage("yes", { taskId: waiting.id, contextId: waiting.contextId })),
      ),
    );
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(a2aText(done.status?.message)).toBe("Done.");
  }, 60_000);
});
