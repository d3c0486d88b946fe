/**
 * Embedded mode (`npm start`: every service in one process on PGlite) runs
 * the built-in harness next to the scripted backend, its providers and
 * tools from the environment — no executor injected, the services'
 * definitions as shipped. Here OpenAI points at the recorded server and
 * Anthropic has no key:
 *
 * - an OpenAI harness agent runs a tool-loop turn into the transcript;
 * - an Anthropic harness agent can be created, but its turn fails with
 *   `provider_authentication` naming the missing key, and nothing is sent;
 * - a provider that refuses the key (recorded 401) is `provider_authentication` too.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import { AdapterRegistryService } from "@trellis/contracts/adapters";
import { type Message, Role, TaskStatus } from "@trellis/contracts/core";
import { SessionService } from "@trellis/contracts/tasks";
import { fixture, OPENAI_CHAT, type RecordedServer } from "@trellis/execution/testing";
import { textOf } from "@trellis/messages";
import type { EmbeddedTrellis } from "@trellis/platform";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createHarnessAgent,
  settledTurn,
  startEmbeddedHarness,
} from "./support/embedded-harness.js";
import { workerToolsModule } from "./worker-support.js";

let server: RecordedServer;
let trellis: EmbeddedTrellis;

beforeAll(async () => {
  ({ server, trellis } = await startEmbeddedHarness({
    openaiKey: "sk-test-embedded",
    toolsModule: workerToolsModule,
  }));
});

afterAll(async () => {
  await trellis?.close();
  await server?.close();
});

const createAgent = (name: string, definition: JsonObject) =>
  createHarnessAgent(trellis, name, definition);

const turn = (agentId: string, text: string) => settledTurn(trellis, agentId, text, 20_000);

describe("the harness in embedded mode", () => {
  it("is an in-process backend beside scripted and a2a", async () => {
    const { backends } = await trellis.client(AdapterRegistryService).listBackends({});
    expect(
      backends
        .filter((b) => b.inProcess)
        .map((b) => b.backendId)
        .sort(),
    ).toEqual(["a2a", "harness", "scripted"]);
  });

  it("runs a tool-loop turn with the deployment's provider and tools", async () => {
    const agentId = await createAgent("weather", {
      provider: "openai",
      model: "gpt-4o-mini",
      tools: ["get_weather"],
      stream: false,
    });
    server.enqueue(
      OPENAI_CHAT,
      fixture("openai/chat-weather-tool-call.http"),
      fixture("openai/chat-weather-final.http"),
    );
    const { task, sessionId } = await turn(agentId, "What's the weather in Paris?");
    expect(task.status, task.failure?.message).toBe(TaskStatus.COMPLETED);
    expect(server.pending()).toEqual({});
    const { messages } = await trellis
      .client(SessionService)
      .listMessages({ sessionId, pageSize: 100 });
    expect(
      messages.map((m) => {
        const message = m.message as Message;
        return [Role[message.role], textOf(message), message.toolCalls.map((c) => c.name).join()];
      }),
    ).toEqual([
      ["USER", "What's the weather in Paris?", ""],
      ["ASSISTANT", "", "get_weather"],
      ["TOOL", '{"city":"Paris","temperature_c":18,"sky":"sunny"}', ""],
      ["ASSISTANT", "It's 18°C and sunny in Paris right now.", ""],
    ]);
    expect(server.requests.at(-1)?.headers.authorization).toBe("Bearer sk-test-embedded");
  });

  it("accepts an agent of a provider without a key; its turn fails with provider_authentication", async () => {
    const agentId = await createAgent("claude", {
      provider: "anthropic",
      model: "claude-sonnet-4-5",
      max_output_tokens: 256,
    });
    const sent = server.requests.length;
    const { task } = await turn(agentId, "Hello?");
    expect(task.status).toBe(TaskStatus.FAILED);
    expect(task.failure?.category).toBe("provider_authentication");
    expect(task.failure?.message).toContain("ANTHROPIC_API_KEY");
    expect(server.requests.length).toBe(sent);
  });

  it("fails a turn the provider refuses the key for with provider_authentication", async () => {
    const agentId = await createAgent("refused", { provider: "openai", model: "gpt-4o-mini" });
    server.enqueue(OPENAI_CHAT, fixture("openai/error-401.http"));
    const { task } = await turn(agentId, "Hello?");
    expect(task.status).toBe(TaskStatus.FAILED);
    expect(task.failure?.category).toBe("provider_authentication");
    expect(task.failure?.retryable).toBe(false);
    expect(server.pending()).toEqual({});
  });
});
