/**
 * @trellis/gateway: the public door of Trellis (REST + SSE of the Harn Agents
 * Protocol, authenticated gRPC), and the key store the `trellis keys` CLI uses.
 */
export { adminKeyFile, adminKeyName, bootstrapAdminKey } from "./auth/bootstrap.js";
export { type GatewayConfig, gatewayConfigSchema, loadGatewayConfig } from "./config.js";
export { gatewayService } from "./definition.js";
export { currentProtocolVersion, supportedProtocolVersions } from "./domain/protocol.js";
export { isGrantableScope, isScope, type Scope, scopeNames } from "./domain/scopes.js";
export { parseAgentIds } from "./policy/agent-policy.js";
export { AgentPolicyStore, agentPolicyMigrations } from "./policy/store.js";
export {
  type ApiKeyRecord,
  type CreatedApiKey,
  generateApiKey,
  hashApiKey,
  type KeyStore,
  type ListApiKeysOptions,
  type NewApiKey,
  PostgresKeyStore,
} from "./store/key-store.js";
export {
  type OAuthClientRecord,
  type OAuthClientStore,
  PostgresOAuthClientStore,
} from "./store/oauth-client-store.js";
export { gatewayMigrations } from "./store/schema.js";
