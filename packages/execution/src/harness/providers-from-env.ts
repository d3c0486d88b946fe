/**
 * The harness's providers as configured by the deployment's environment:
 * `OPENAI_API_KEY` / `OPENAI_BASE_URL` and `ANTHROPIC_API_KEY` /
 * `ANTHROPIC_BASE_URL`, plus `TRELLIS_HARNESS_PROVIDER_TIMEOUT_MS` (per model
 * call, default 120000) and `TRELLIS_HARNESS_PROVIDER_MAX_RETRIES` (SDK
 * retries, default 0). Read by a service's `main.ts`, never by handlers.
 */
import { ANTHROPIC_PROVIDER, createAnthropicProvider } from "./anthropic-provider.js";
import { createOpenAIProvider, OPENAI_PROVIDER } from "./openai-provider.js";
import type { ModelProviderFactory, ProviderConnection } from "./provider.js";

function nonNegativeInteger(env: Record<string, string | undefined>, name: string) {
  const text = env[name];
  if (text === undefined || text === "") return undefined;
  const value = Number(text);
  if (!Number.isInteger(value) || value < 0) {
    throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(text)}`);
  }
  return value;
}

function connection(
  env: Record<string, string | undefined>,
  prefix: "OPENAI" | "ANTHROPIC",
): ProviderConnection {
  const apiKey = env[`${prefix}_API_KEY`];
  const baseURL = env[`${prefix}_BASE_URL`];
  const timeoutMs = nonNegativeInteger(env, "TRELLIS_HARNESS_PROVIDER_TIMEOUT_MS");
  const maxRetries = nonNegativeInteger(env, "TRELLIS_HARNESS_PROVIDER_MAX_RETRIES");
  return {
    ...(apiKey ? { apiKey } : {}),
    ...(baseURL ? { baseURL } : {}),
    ...(timeoutMs !== undefined ? { timeoutMs } : {}),
    ...(maxRetries !== undefined ? { maxRetries } : {}),
  };
}

/**
 * Both providers, connected as the environment says. A provider without a
 * key is still listed (agents naming it validate), and its calls fail with
 * `provider_authentication`.
 */
export function harnessProvidersFromEnv(
  env: Record<string, string | undefined>,
): Record<string, ModelProviderFactory> {
  return {
    [OPENAI_PROVIDER]: createOpenAIProvider(connection(env, "OPENAI")),
    [ANTHROPIC_PROVIDER]: createAnthropicProvider(connection(env, "ANTHROPIC")),
  };
}
