/**
 * @trellis/execution: running one agent turn. The executor types, the router
 * (policy, registry, remote dispatch over JetStream and the embedded gRPC
 * worker hub) and the in-process backends (scripted, harness, A2A) with what
 * they read (vault secrets, the harness's tool-run ledger). The tasks service
 * runs turns through it; the adapters service serves its registry, routing
 * and vaults over RPC and runs it in adapter workers.
 */

/**
 * The execution seam (BYOH): how the tasks service asks an agent backend to
 * run one turn. The types live in @trellis/adapter-sdk (so adapter workers
 * outside this package share them) and map one-to-one onto the proto
 * contract `trellis.adapters.v1` (proto/trellis/adapters/v1/execution.proto,
 * mapping in packages/adapter-sdk/src/mapping/).
 *
 * Members added for BYOH are optional on {@link ExecutionAdapter}
 * (`describeCapabilities`, `negotiate`, `executeStreaming`, `schemaVersion`),
 * and every new request / result field is optional, so adapters written
 * against the first version of this port still compile and run; the router
 * assumes minimal capabilities for an adapter that does not describe itself.
 */
export type {
  AgentExecutor,
  ExecutionAdapter,
  ExecutionAgent,
  ExecutionCapabilities,
  ExecutionEvent,
  ExecutionNegotiation,
  ExecutionRequest,
  ExecutionRequirements,
  ExecutionResult,
  ExecutionToolDescriptor,
  ExecutionUsage,
  NegotiationReason,
  RoutingPolicy,
  RunMemory,
  RunMemoryRecord,
} from "@trellis/adapter-sdk";
export {
  narrowRequirements,
  requirementProblems,
  requirementsFromProto,
  requirementsToProto,
} from "@trellis/adapter-sdk";
export {
  type AdaptersConfig,
  adaptersConfigSchema,
  hubOptions,
  loadAdaptersConfig,
} from "./config.js";
export {
  type LocalRouter,
  MAX_BACKLOG,
  NatsWorkerBridge,
  type NatsWorkerBridgeOptions,
} from "./grpc-workers/bridge.js";
export {
  callError,
  createWorkerHandlers,
  MAX_EVENTS_PER_REPORT,
} from "./grpc-workers/handlers.js";
export {
  embeddedWorkerHub,
  LocalWorkerHub,
  type LocalWorkerHubOptions,
} from "./grpc-workers/hub.js";
export {
  type SessionEnd,
  secretsRefused,
  sessionNotFound,
  type VaultGrantInit,
  type WorkAttempt,
  type WorkerPort,
  WorkerSession,
} from "./grpc-workers/session.js";
export { WorkerSessions, type WorkerSessionsOptions } from "./grpc-workers/sessions.js";
export * from "./harness/index.js";
export {
  type BuiltinAdaptersOptions,
  createBuiltinAdapters,
  createInProcessBackends,
  createLocalExecutor,
  type InProcessBackends,
  type InProcessBackendsOptions,
} from "./local-executor.js";
export { type AgentFacts, type AgentFactsOptions, withAgentFacts } from "./routing/agent-facts.js";
export {
  announcementFromProto,
  announcementToProto,
} from "./routing/announcement.js";
export type {
  JetStreamDispatcherOptions,
  VaultAccessLoader,
} from "./routing/dispatcher-options.js";
export { JetStreamDispatcher } from "./routing/jetstream-dispatcher.js";
export {
  type Candidate,
  type Decision,
  decide,
  noBackendResult,
  type PreparedRequest,
  prepareRequest,
  ROUTING_KEY,
  routingFromDefinition,
  unwrapCheckpoint,
  wrapCheckpoint,
} from "./routing/policy.js";
export {
  type BackendHints,
  BackendRegistry,
  type BackendRegistryOptions,
  type BackendView,
  type LocalBackendOptions,
  validateAnnouncement,
  type WorkerAnnouncement,
  type WorkerEntry,
} from "./routing/registry.js";
export {
  createRoutedExecutor,
  type RoutedExecutor,
  type RoutedExecutorOptions,
  routedNats,
} from "./routing/routed-executor.js";
export {
  type DispatchOutcome,
  type DispatchPlan,
  type RemoteDispatcher,
  Router,
  type RouterOptions,
} from "./routing/router.js";
export {
  END,
  type GraphMessage,
  parseGraph,
  runGraph,
  type ScriptedGraph,
} from "./scripted/graph.js";
export {
  createScriptedAdapter,
  SCRIPTED_BACKEND,
  SCRIPTED_CAPABILITIES,
} from "./scripted/scripted-adapter.js";
export {
  ACCESS_TOKEN_NAME,
  type AccessToken,
  isTokenEndpoint,
  OAUTH_GRANT_FIELDS,
  OAUTH_PROVIDER,
  OAUTH_REFRESH,
  type OAuthGrant,
  OAuthRefreshError,
  OAuthTokens,
  type OAuthTokensOptions,
} from "./vaults/oauth-refresh.js";
export { adaptersMigrations } from "./vaults/schema.js";
export {
  type NewVault,
  type SecretInfo,
  VAULT_CAPABILITIES,
  VAULT_PROVIDER,
  VAULT_PROVIDERS,
  type VaultAccess,
  type VaultRecord,
  VaultStore,
} from "./vaults/store.js";
export { vaultAccessThrough, vaultSecretLoader } from "./vaults/vault-environment.js";
export {
  loadVaultBox,
  VAULT_KEY_FILE,
  VAULT_KEY_NAME,
  type VaultKeyOptions,
} from "./vaults/vault-key.js";
export { loadHarnessTools } from "./worker/harness-tools.js";
