// A2A against `trellis dev` as `npm start` runs it: the official
// @a2a-js/sdk client, given only the default agent's card URL and an API key,
// sends a message and gets the reply, streams a turn, and resumes an
// input-required turn of a gated agent with a second message.
import { randomUUID } from "node:crypto";
import { type Message, Role, type StreamResponse, type Task, TaskState } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startTrellisDev, type TrellisDev } from "./support/trellis-dev.js";

const KEY = `trellis-a2a-dev-${randomUUID()}`;

async function clientOf(cardUrl: string): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("authorization", `Bearer ${KEY}`);
    return fetch(input, { ...init, headers });
  };
  return new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  ).createFromUrl(cardUrl, cardUrl);
}

function message(text: string, extra: Partial<Message> = {}): Message {
  return {
    messageId: randomUUID(),
    contextId: "",
    taskId: "",
    role: Role.ROLE_USER,
    parts: [
      {
        content: { $case: "text", value: text },
        metadata: undefined,
        filename: "",
        mediaType: "text/plain",
      },
    ],
    metadata: undefined,
    extensions: [],
    referenceTaskIds: [],
    ...extra,
  };
}

const send = (m: Message) => ({
  tenant: "",
  message: m,
  configuration: undefined,
  metadata: undefined,
});

function asTask(result: Message | Task): Task {
  if (!("status" in result)) throw new Error("expected a task");
  return result;
}

const textOf = (m: Message | undefined) =>
  (m?.parts ?? []).map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");

describe("A2A on trellis dev", () => {
  let dev: TrellisDev;

  beforeAll(async () => {
    dev = await startTrellisDev({ TRELLIS_API_KEY: KEY, TRELLIS_LOG_LEVEL: "warn" });
  }, 90_000);

  afterAll(async () => {
    await dev?.stop();
  });

  it("sends, streams, and resumes an input-required turn", async () => {
    const client = await clientOf(`${dev.url}/.well-known/agent-card.json`);
    const reply = asTask(await client.sendMessage(send(message("hello from A2A"))));
    expect(reply.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(reply.status?.message)).toBe("hello from A2A");

    const events: StreamResponse[] = [];
    for await (const event of client.sendMessageStream(send(message("streamed")))) {
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
          textOf({ parts: e.payload.value.artifact?.parts ?? [] } as unknown as Message) ===
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
    const gated = await clientOf(`${dev.url}/a2a/${id}/.well-known/agent-card.json`);
    const waiting = asTask(await gated.sendMessage(send(message("please"))));
    expect(waiting.status?.state).toBe(TaskState.TASK_STATE_INPUT_REQUIRED);
    const done = asTask(
      await gated.sendMessage(
        send(message("yes", { taskId: waiting.id, contextId: waiting.contextId })),
      ),
    );
    expect(done.status?.state).toBe(TaskState.TASK_STATE_COMPLETED);
    expect(textOf(done.status?.message)).toBe("Done.");
  }, 60_000);
});
