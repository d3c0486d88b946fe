/**
 * The built-in harness against the recorded provider server: the server and
 * a harness adapter whose providers call it, started together, and the
 * recorded weather turn (the agent it was recorded for, its responses) that
 * the harness, replay and tracing tests run.
 */
import type { JsonObject } from "@bufbuild/protobuf";
import {
  createHarnessAdapter,
  type ExecutionAdapter,
  type HarnessAdapterOptions,
} from "../index.js";
import { recordedProviders } from "./harness-agents.js";
import { type RecordedServer, startRecordedServer } from "./recorded-server.js";

/** A running recorded server and a harness adapter whose providers call it. */
export interface RecordedHarness {
  server: RecordedServer;
  adapter: ExecutionAdapter;
}

/**
 * Starts a recorded server and a harness adapter with these options, its
 * providers ({@link recordedProviders}) pointed at the server.
 */
export async function startRecordedHarness(
  options: Omit<HarnessAdapterOptions, "providers"> = {},
): Promise<RecordedHarness> {
  const server = await startRecordedServer();
  const adapter = createHarnessAdapter({ ...options, providers: recordedProviders(server.url) });
  return { server, adapter };
}

/**
 * The definition of the agent the weather turn was recorded for: OpenAI
 * gpt-4o-mini with `get_weather`, streamed or not.
 */
export function weatherAgent(options: { stream: boolean }): JsonObject {
  return {
    provider: "openai",
    model: "gpt-4o-mini",
    system: "You are a helpful assistant.",
    tools: ["get_weather"],
    stream: options.stream,
  };
}

/**
 * The recorded weather turn's OpenAI responses, in order (a `get_weather`
 * call for Paris, then the answer), for `enqueueChat`.
 */
export function weatherTurn(options: { stream: boolean }): string[] {
  const ext = options.stream ? "stream.http" : "http";
  return [`openai/chat-weather-tool-call.${ext}`, `openai/chat-weather-final.${ext}`];
}
