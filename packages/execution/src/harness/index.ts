/** The built-in tool-loop harness (backend "harness") and its model providers. */
export {
  ANTHROPIC_PROVIDER,
  type AnthropicProviderOptions,
  createAnthropicProvider,
} from "./anthropic-provider.js";
export {
  ASK_USER,
  ASK_USER_TOOL,
  MAX_ANSWER_LENGTH,
  MAX_QUESTION_LENGTH,
} from "./clarification.js";
export {
  type EnvironmentCall,
  type HarnessEnvironment,
  isVaultSecretName,
  SecretAccessError,
  type SecretScope,
  type SecretSource,
  textSha256,
} from "./environment.js";
export {
  CONTEXT_SUMMARY_NAME,
  createHarnessAdapter,
  HARNESS_BACKEND,
  type HarnessAdapterOptions,
} from "./harness-adapter.js";
export {
  DEFAULT_MAX_STEPS,
  type HarnessDefinition,
  HarnessDefinitionError,
  parseHarnessDefinition,
} from "./harness-definition.js";
export {
  harnessMcpPolicyFromEnv,
  MCP_TOOL_PREFIX,
  type McpPolicy,
  type McpServerSpec,
  mcpToolName,
} from "./mcp/definition.js";
export { checkOutbound, isPrivateAddress, OutboundRefusedError } from "./mcp/outbound.js";
export { type McpErrorCode, McpToolError } from "./mcp/session.js";
export {
  MEMORY_READ,
  MEMORY_READ_TOOL,
  MEMORY_TOOLS,
  MEMORY_WRITE,
  MEMORY_WRITE_TOOL,
  withMemoryTools,
} from "./memory-tools.js";
export {
  createOpenAIProvider,
  OPENAI_PROVIDER,
  type OpenAIProviderOptions,
} from "./openai-provider.js";
export type {
  FinishReason,
  ModelDelta,
  ModelProvider,
  ModelProviderFactory,
  ModelRequest,
  ModelResponse,
  ModelTool,
  ModelUsage,
  ProviderConnection,
} from "./provider.js";
export {
  isProviderError,
  ProviderError,
  type ProviderErrorCategory,
  type ProviderErrorOptions,
} from "./provider-error.js";
export { harnessProvidersFromEnv } from "./providers-from-env.js";
export {
  InMemoryToolRunLedger,
  PostgresToolRunLedger,
  type PostgresToolRunLedgerOptions,
  type ToolRunClaim,
  type ToolRunLedger,
  type ToolRunOutcome,
  toolRunLedgerMigrations,
} from "./tool-run-ledger.js";
export {
  type HarnessTool,
  type InputProblem,
  resultText,
  type ToolContext,
  ToolRegistry,
} from "./tools.js";
