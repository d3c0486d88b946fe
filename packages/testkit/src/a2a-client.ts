/**
 * The client side of A2A in tests: the official `@a2a-js/sdk` client given
 * only a card URL and an API key, the text messages it sends and reads, and
 * a raw JSON-RPC call for what the SDK will not send (hostile bodies, wrong
 * or missing credentials).
 */
import { randomUUID } from "node:crypto";
import { type Message, Role, type Task } from "@a2a-js/sdk";
import {
  type Client,
  ClientFactory,
  ClientFactoryOptions,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
} from "@a2a-js/sdk/client";

/** An SDK client of the agent whose card is at `cardUrl`, authenticating with `key`. */
export async function a2aClient(cardUrl: string, key: string): Promise<Client> {
  const fetchImpl: typeof fetch = (input, init) => {
    const headers = new Headers(init?.headers);
    headers.set("authorization", `Bearer ${key}`);
    return fetch(input, { ...init, headers });
  };
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl }),
    }),
  );
  return factory.createFromUrl(cardUrl, cardUrl);
}

/** A user's message of one text part, new id; `extra` sets the task, context or other fields. */
export function a2aTextMessage(text: string, extra: Partial<Message> = {}): Message {
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

/** The text parts of `message`, joined (empty when there is none). */
export function a2aText(message: Message | undefined): string {
  return (message?.parts ?? [])
    .map((p) => (p.content?.$case === "text" ? p.content.value : ""))
    .join("");
}

/** `result` as a task; throws when the agent answered with a message. */
export function asA2aTask(result: Message | Task): Task {
  if (!("status" in result)) throw new Error("expected a task, got a message");
  return result;
}

/** POST a JSON-RPC `body` to the A2A endpoint `url` (protocol 1.0), with `key` as bearer when given. */
export function postA2aRpc(url: string, body: string, key?: string): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "a2a-version": "1.0",
      ...(key ? { authorization: `Bearer ${key}` } : {}),
    },
    body,
  });
}
