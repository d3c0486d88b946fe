/**
 * The execution seam (BYOH): how the tasks service asks an agent backend to
 * run one turn. The types live in @trellis/adapter-sdk (so adapter workers
 * outside this service share them) and map one-to-one onto the proto
 * contract `trellis.adapters.v1` (proto/trellis/adapters/v1/execution.proto,
 * mapping in packages/adapter-sdk/src/mapping.ts).
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
