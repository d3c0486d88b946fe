/**
 * The deployment's provider configuration: keys and base URLs from the
 * environment reach the real SDK clients; bad settings are refused clearly.
 */
import { describe, expect, it } from "vitest";
import { harnessProvidersFromEnv, isProviderError } from "../../src/index.js";
import { userText } from "../../src/testing/harness-agents.js";
import { ANTHROPIC_MESSAGES, fixture, OPENAI_CHAT } from "../../src/testing/recorded-server.js";
import { useRecordedServer } from "./support/fixture.js";

const server = useRecordedServer();

describe("harnessProvidersFromEnv", () => {
  it("connects each provider with its *_API_KEY and *_BASE_URL", async () => {
    const providers = harnessProvidersFromEnv({
      OPENAI_API_KEY: "sk-from-env",
      OPENAI_BASE_URL: `${server.url}/v1`,
      ANTHROPIC_API_KEY: "sk-ant-from-env",
      ANTHROPIC_BASE_URL: server.url,
    });
    server.enqueue(OPENAI_CHAT, fixture("openai/chat-weather-final.http"));
    server.enqueue(ANTHROPIC_MESSAGES, fixture("anthropic/messages-weather-final.http"));
    const request = { messages: [userText("Weather?")], tools: [], stream: false };
    const openai = await providers.openai?.("gpt-4o-mini").complete(request);
    const anthropic = await providers.anthropic?.("claude-sonnet-5-5").complete({
      ...request,
      maxOutputTokens: 100,
    });
    expect(openai?.finishReason).toBe("stop");
    expect(anthropic?.finishReason).toBe("stop");
    expect(server.requests.map((r) => [r.path, r.headers.authorization])).toEqual([
      ["/v1/chat/completions", "Bearer sk-from-env"],
      ["/v1/messages", "Bearer sk-ant-from-env"],
    ]);
  });

  it("lists a provider without a key; its calls fail with provider_authentication", async () => {
    const providers = harnessProvidersFromEnv({});
    const error = await providers
      .openai?.("gpt-4o-mini")
      .complete({ messages: [userText("hi")], tools: [], stream: false })
      .catch((e: unknown) => e);
    expect(isProviderError(error) && error.category).toBe("provider_authentication");
  });

  it("refuses a timeout that is not a non-negative integer", () => {
    expect(() => harnessProvidersFromEnv({ TRELLIS_HARNESS_PROVIDER_TIMEOUT_MS: "soon" })).toThrow(
      /TRELLIS_HARNESS_PROVIDER_TIMEOUT_MS must be a non-negative integer/,
    );
  });
});
