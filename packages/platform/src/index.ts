/**
 * @trellis/platform: how a Trellis service is defined, and the two hosts that
 * run it (distributed: its own process on Postgres + JetStream; embedded: all
 * services in one process on PGlite + the in-process log).
 */

export { DEFAULT_EVENT_WINDOW } from "@trellis/eventlog";
export { DEFAULT_PORTS, ownerOf, serviceUrl, urlVariable } from "./addresses.js";
export {
  type Caller,
  callerFromHeaders,
  callerHeaders,
  callerKey,
  callerOf,
  confinedWorkspaceOf,
  type HeaderGetter,
  isAdminCaller,
  setCallerHeaders,
} from "./caller.js";
export { DEFAULT_CONSUMER_POSITION_FLUSH_MS } from "./defaults.js";
export {
  distributedConfigSchema,
  type RunningService,
  type RunningServices,
  type RunServiceOptions,
  runService,
  runServiceMain,
  runServices,
} from "./distributed.js";
export {
  EMBEDDED_OUTBOX_SCHEMA,
  type EmbeddedOptions,
  type EmbeddedTrellis,
  startEmbedded,
} from "./embedded.js";
export {
  distributedFingerprints,
  embeddedFingerprints,
  FINGERPRINT_KEY_LABEL,
  fingerprintKeyFromEnv,
  fingerprintKeyVariable,
} from "./fingerprint-key.js";
export {
  createMeshClientInterceptor,
  createMeshServerInterceptor,
  MeshCredentials,
  type MeshCredentialsOptions,
  type MeshFailure,
  type MeshHttpRequest,
  type MeshVerification,
  meshCredentialsFromEnv,
  meshError,
  meshFailureMessage,
  meshHeader,
  meshHttpTarget,
  meshRpcTarget,
  meshSecretFileVariable,
  meshSecretVariable,
  meshSignedRpc,
  minMeshSecretLength,
  processMeshCredentials,
  verifyMeshHttp,
} from "./mesh.js";
export {
  checkOutboundUrl,
  isOutboundAddressAllowed,
  OUTBOUND_BLOCKED,
  type OutboundPolicy,
  outboundAddressRefusal,
  outboundLookup,
  redirectTarget,
  resolveOutbound,
} from "./outbound-address.js";
export type {
  Mode,
  ServiceClients,
  ServiceContext,
  ServiceDefinition,
  ServiceModule,
} from "./service.js";
