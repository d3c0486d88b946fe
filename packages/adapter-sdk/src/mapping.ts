/**
 * The one-to-one mapping between the TypeScript seam (`./types.ts`) and the
 * proto contract `trellis.adapters.v1`. Every TS field has exactly one proto
 * field and back:
 *
 * | TypeScript                         | proto                                   |
 * |------------------------------------|-----------------------------------------|
 * | request.taskId / sessionId / workspaceId / agent.id / traceId / traceparent | request.correlation.turn_id / session_id / workspace_id / agent_id / trace_id / traceparent |
 * | request.agent.{backend, definition, tools, safeToRetry, routing} | request.agent.{…} |
 * | request.history / input / resume / requirements / toolDescriptors / metadata / state | history / input / resume / requirements / tools / metadata / state |
 * | result.state                       | result.state                            |
 * | "forbidden" / "none" / "allowed" / "preferred" / "required" | REQUIREMENT_* |
 * | capabilities strings               | the matching enum values (never UNSPECIFIED) |
 * | result.status + its fields         | result.outcome oneof (completed / suspended / failed / cancelled) |
 * | event.kind + its fields            | event.kind oneof                        |
 *
 * Not mapped, because they only exist in a process: `request.signal` (a
 * remote caller cancels the call; a worker receives a CancelNotice) and
 * `request.onEvent` (remote progress is the ExecutionEvent stream).
 *
 * Decoding validates: a value outside a field's accepted set, or an
 * UNSPECIFIED capability, is a `execution_contract_invalid` error naming the
 * field (Connect InvalidArgument through the error interceptor).
 *
 * The parts: mapping/tables.ts (enum tables, shared helpers),
 * mapping/negotiation.ts, mapping/request.ts, mapping/result.ts and
 * mapping/events.ts (events, vault grants).
 */
export {
  eventFromProto,
  eventToProto,
  vaultGrantsFromProto,
  vaultGrantsToProto,
} from "./mapping/events.js";
export {
  capabilitiesFromProto,
  capabilitiesToProto,
  negotiationFromProto,
  negotiationToProto,
  reasonFromProto,
  reasonToProto,
  requirementsFromProto,
  requirementsToProto,
} from "./mapping/negotiation.js";
export {
  MAX_POLICY_BACKENDS,
  type RequestRuntime,
  requestFromProto,
  requestToProto,
  routingPolicyFromProto,
  routingPolicyToProto,
} from "./mapping/request.js";
export { resultFromProto, resultToProto } from "./mapping/result.js";
export { contractInvalid } from "./mapping/tables.js";
