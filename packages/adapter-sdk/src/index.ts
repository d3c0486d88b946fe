/**
 * @trellis/adapter-sdk: write an agent backend for Trellis (the BYOH
 * execution seam) and run it as a worker process of the mesh.
 *
 * @example
 *   import { defineAdapter, runWorkerMain } from "@trellis/adapter-sdk";
 *   await runWorkerMain(defineAdapter({ backendId: "echo", capabilities, run }));
 */

// Message helpers an adapter needs to read its input and write its replies.
export {
  type ChatMessageJson,
  chatToMessage,
  messageToChat,
  textOf,
} from "@trellis/messages";
export { type AdapterSpec, BACKEND_ID_PATTERN, defineAdapter } from "./define-adapter.js";
export { type GrpcWorkerOptions, runGrpcWorker } from "./grpc-worker.js";
export {
  capabilitiesFromProto,
  capabilitiesToProto,
  contractInvalid,
  eventFromProto,
  eventToProto,
  MAX_POLICY_BACKENDS,
  negotiationFromProto,
  negotiationToProto,
  type RequestRuntime,
  reasonFromProto,
  reasonToProto,
  requestFromProto,
  requestToProto,
  requirementsFromProto,
  requirementsToProto,
  resultFromProto,
  resultToProto,
  routingPolicyFromProto,
  routingPolicyToProto,
  vaultGrantsFromProto,
  vaultGrantsToProto,
} from "./mapping.js";
export {
  attachmentCount,
  CAPABILITY_ORDER,
  capabilitiesOf,
  capabilityProblems,
  effectiveRequirements,
  MAX_CAPABILITY_NOTE_CHARS,
  MAX_CAPABILITY_NOTES,
  MINIMAL_CAPABILITIES,
  narrowRequirements,
  negotiateCapabilities,
  negotiateWith,
  requirementProblems,
  type SeamProblem,
  weakestCapabilities,
} from "./negotiation.js";
export {
  adapterErrorResult,
  ExecutionTimeout,
  type RunExecutionOptions,
  runExecution,
  streamExecution,
  timeoutResult,
  unsupportedResult,
} from "./run-execution.js";
export {
  type AgentExecutor,
  type AllowRequirement,
  EXECUTION_SCHEMA_VERSION,
  type ExecutionAdapter,
  type ExecutionAgent,
  type ExecutionCapabilities,
  type ExecutionEvent,
  type ExecutionNegotiation,
  type ExecutionRequest,
  type ExecutionRequirements,
  type ExecutionResult,
  type ExecutionResultInfo,
  type ExecutionToolDescriptor,
  type ExecutionTraceSummary,
  type ExecutionUsage,
  type NegotiationReason,
  type PreferRequirement,
  type ReasonCode,
  type RoutingPolicy,
  type RunMemory,
  type RunMemoryRecord,
  type SuspensionReason,
  type TraceDepth,
  type VaultGrant,
  type WantRequirement,
} from "./types.js";
export {
  ensureBackendConsumer,
  ensureWorkStream,
  isNoResponders,
  isTimeout,
  TOKEN_PATTERN,
  toToken,
  type WireNames,
  type WorkStreamOptions,
  wireNames,
} from "./wire.js";
export { type AdapterWorker, runWorker, type WorkerOptions } from "./worker.js";
export { runWorkerMain, workerConfigSchema } from "./worker-main.js";
