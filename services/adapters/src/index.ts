/** @trellis/adapters: the execution seam and the backends Trellis ships. */
export { type AdaptersConfig, adaptersConfigSchema, loadAdaptersConfig } from "./config.js";
export {
  type AdaptersServiceOptions,
  adaptersService,
  createAdaptersService,
  hubOptions,
} from "./definition.js";
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
} from "./executor.js";
export { createWorkerHandlers } from "./grpc-workers/handlers.js";
export {
  embeddedWorkerHub,
  LocalWorkerHub,
  type LocalWorkerHubOptions,
} from "./grpc-workers/hub.js";
export type { SessionEnd, WorkAttempt, WorkerPort, WorkerSession } from "./grpc-workers/session.js";
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
export {
  JetStreamDispatcher,
  type JetStreamDispatcherOptions,
} from "./routing/jetstream-dispatcher.js";
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
  type WorkerAnnouncement,
  type WorkerEntry,
} from "./routing/registry.js";
export {
  createRoutedExecutor,
  type RoutedExecutor,
  type RoutedExecutorOptions,
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
  createVaultAccessHandlers,
  createVaultHandlers,
  MAX_SECRET_BYTES,
  SECRET_NAME,
} from "./vaults/handlers.js";
export {
  ACCESS_TOKEN_NAME,
  type AccessToken,
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
export {
  type AdapterWorkerOptions,
  type RunningAdapterWorker,
  startAdapterWorker,
} from "./worker/adapter-worker.js";
export {
  ADAPTER_WORKER,
  ADAPTER_WORKER_PORT,
  type AdapterWorkerConfig,
  adapterWorkerConfigSchema,
  BUILTIN_WORKER_BACKENDS,
  loadAdapterWorkerConfig,
} from "./worker/config.js";
export { loadHarnessTools } from "./worker/harness-tools.js";
export { runAdapterWorkerMain } from "./worker/main.js";
