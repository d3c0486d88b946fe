from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trellis.core.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

APPROVAL_INTERRUPTS_ADAPTER_MEDIATED: ApprovalInterrupts
APPROVAL_INTERRUPTS_NATIVE: ApprovalInterrupts
APPROVAL_INTERRUPTS_NONE: ApprovalInterrupts
APPROVAL_INTERRUPTS_UNSPECIFIED: ApprovalInterrupts
CONTEXT_STRATEGY_LARGE: ContextStrategy
CONTEXT_STRATEGY_MEDIUM: ContextStrategy
CONTEXT_STRATEGY_SMALL: ContextStrategy
CONTEXT_STRATEGY_UNKNOWN: ContextStrategy
CONTEXT_STRATEGY_UNSPECIFIED: ContextStrategy
CONTINUATION_SUPPORT_NONE: ContinuationSupport
CONTINUATION_SUPPORT_OPAQUE_RESUME: ContinuationSupport
CONTINUATION_SUPPORT_STRUCTURED: ContinuationSupport
CONTINUATION_SUPPORT_UNSPECIFIED: ContinuationSupport
DESCRIPTOR: _descriptor.FileDescriptor
REASON_CODE_APPROVAL_INTERRUPT_UNSUPPORTED: ReasonCode
REASON_CODE_ATTACHMENTS_UNSUPPORTED: ReasonCode
REASON_CODE_BACKEND_UNAVAILABLE: ReasonCode
REASON_CODE_CONTEXT_PRESSURE_EXPECTED: ReasonCode
REASON_CODE_CONTINUATION_UNSUPPORTED: ReasonCode
REASON_CODE_OTHER: ReasonCode
REASON_CODE_SCHEMA_VERSION_UNSUPPORTED: ReasonCode
REASON_CODE_STREAMING_UNSUPPORTED: ReasonCode
REASON_CODE_STRUCTURED_TOOL_CALLS_UNSUPPORTED: ReasonCode
REASON_CODE_TOOL_USE_UNSUPPORTED: ReasonCode
REASON_CODE_TRACE_DEPTH_REDUCED: ReasonCode
REASON_CODE_UNSPECIFIED: ReasonCode
REQUIREMENT_ALLOWED: Requirement
REQUIREMENT_FORBIDDEN: Requirement
REQUIREMENT_NONE: Requirement
REQUIREMENT_PREFERRED: Requirement
REQUIREMENT_REQUIRED: Requirement
REQUIREMENT_UNSPECIFIED: Requirement
ROUTING_PREFERENCE_COST: RoutingPreference
ROUTING_PREFERENCE_LATENCY: RoutingPreference
ROUTING_PREFERENCE_UNSPECIFIED: RoutingPreference
SEVERITY_BLOCKING: Severity
SEVERITY_INFO: Severity
SEVERITY_UNSPECIFIED: Severity
SEVERITY_WARNING: Severity
STREAMING_SUPPORT_ADAPTER_MEDIATED: StreamingSupport
STREAMING_SUPPORT_NATIVE: StreamingSupport
STREAMING_SUPPORT_NONE: StreamingSupport
STREAMING_SUPPORT_UNSPECIFIED: StreamingSupport
SUSPENSION_KIND_AUTH: SuspensionKind
SUSPENSION_KIND_INPUT: SuspensionKind
SUSPENSION_KIND_UNSPECIFIED: SuspensionKind
SUSPENSION_REASON_APPROVAL: SuspensionReason
SUSPENSION_REASON_CLARIFICATION: SuspensionReason
SUSPENSION_REASON_DEFERRED: SuspensionReason
SUSPENSION_REASON_UNSPECIFIED: SuspensionReason
TOOL_OUTCOME_DENIED: ToolOutcome
TOOL_OUTCOME_ERROR: ToolOutcome
TOOL_OUTCOME_OK: ToolOutcome
TOOL_OUTCOME_TIMEOUT: ToolOutcome
TOOL_OUTCOME_UNSPECIFIED: ToolOutcome
TOOL_USE_SUPPORT_ADAPTER_MEDIATED: ToolUseSupport
TOOL_USE_SUPPORT_NATIVE_ITERATIVE: ToolUseSupport
TOOL_USE_SUPPORT_NONE: ToolUseSupport
TOOL_USE_SUPPORT_UNSPECIFIED: ToolUseSupport
TRACE_DEPTH_DETAILED: TraceDepth
TRACE_DEPTH_MINIMAL: TraceDepth
TRACE_DEPTH_STANDARD: TraceDepth
TRACE_DEPTH_UNSPECIFIED: TraceDepth

class ApprovalRequest(_message.Message):
    __slots__ = ["approval_key", "metadata", "reason"]
    APPROVAL_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    approval_key: str
    metadata: _struct_pb2.Struct
    reason: str
    def __init__(self, reason: _Optional[str] = ..., approval_key: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Correlation(_message.Message):
    __slots__ = ["agent_id", "session_id", "trace_id", "traceparent", "turn_id", "workspace_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TRACEPARENT_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    session_id: str
    trace_id: str
    traceparent: str
    turn_id: str
    workspace_id: str
    def __init__(self, turn_id: _Optional[str] = ..., session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., trace_id: _Optional[str] = ..., traceparent: _Optional[str] = ...) -> None: ...

class ExecutionAgent(_message.Message):
    __slots__ = ["backend", "definition", "routing", "safe_to_retry", "tools"]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    ROUTING_FIELD_NUMBER: _ClassVar[int]
    SAFE_TO_RETRY_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    backend: str
    definition: _struct_pb2.Struct
    routing: RoutingPolicy
    safe_to_retry: bool
    tools: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, backend: _Optional[str] = ..., definition: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tools: _Optional[_Iterable[str]] = ..., safe_to_retry: bool = ..., routing: _Optional[_Union[RoutingPolicy, _Mapping]] = ...) -> None: ...

class ExecutionCancelled(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ExecutionCapabilities(_message.Message):
    __slots__ = ["approval_interrupts", "attachments", "continuation_support", "max_context_strategy", "notes", "schema_version", "streaming", "structured_tool_calls", "tool_use", "trace_depth"]
    APPROVAL_INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_SUPPORT_FIELD_NUMBER: _ClassVar[int]
    MAX_CONTEXT_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    TRACE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    approval_interrupts: ApprovalInterrupts
    attachments: bool
    continuation_support: ContinuationSupport
    max_context_strategy: ContextStrategy
    notes: _containers.RepeatedScalarFieldContainer[str]
    schema_version: int
    streaming: StreamingSupport
    structured_tool_calls: bool
    tool_use: ToolUseSupport
    trace_depth: TraceDepth
    def __init__(self, schema_version: _Optional[int] = ..., tool_use: _Optional[_Union[ToolUseSupport, str]] = ..., structured_tool_calls: bool = ..., continuation_support: _Optional[_Union[ContinuationSupport, str]] = ..., approval_interrupts: _Optional[_Union[ApprovalInterrupts, str]] = ..., trace_depth: _Optional[_Union[TraceDepth, str]] = ..., attachments: bool = ..., streaming: _Optional[_Union[StreamingSupport, str]] = ..., max_context_strategy: _Optional[_Union[ContextStrategy, str]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...

class ExecutionCompleted(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ExecutionEvent(_message.Message):
    __slots__ = ["message", "routed", "step_finished", "text_delta", "thinking_delta", "tool_call_delta", "tool_finished", "tool_started", "turn_finished"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ROUTED_FIELD_NUMBER: _ClassVar[int]
    STEP_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    THINKING_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TOOL_STARTED_FIELD_NUMBER: _ClassVar[int]
    TURN_FINISHED_FIELD_NUMBER: _ClassVar[int]
    message: _message_pb2.Message
    routed: Routed
    step_finished: StepFinished
    text_delta: TextDelta
    thinking_delta: ThinkingDelta
    tool_call_delta: ToolCallDelta
    tool_finished: ToolFinished
    tool_started: ToolStarted
    turn_finished: TurnFinished
    def __init__(self, text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., thinking_delta: _Optional[_Union[ThinkingDelta, _Mapping]] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., tool_call_delta: _Optional[_Union[ToolCallDelta, _Mapping]] = ..., tool_started: _Optional[_Union[ToolStarted, _Mapping]] = ..., tool_finished: _Optional[_Union[ToolFinished, _Mapping]] = ..., step_finished: _Optional[_Union[StepFinished, _Mapping]] = ..., routed: _Optional[_Union[Routed, _Mapping]] = ..., turn_finished: _Optional[_Union[TurnFinished, _Mapping]] = ...) -> None: ...

class ExecutionFailed(_message.Message):
    __slots__ = ["category", "message", "reasons", "retryable"]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    category: str
    message: str
    reasons: _containers.RepeatedCompositeFieldContainer[NegotiationReason]
    retryable: bool
    def __init__(self, category: _Optional[str] = ..., message: _Optional[str] = ..., retryable: bool = ..., reasons: _Optional[_Iterable[_Union[NegotiationReason, _Mapping]]] = ...) -> None: ...

class ExecutionNegotiation(_message.Message):
    __slots__ = ["degraded", "effective_capabilities", "reasons", "supported"]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    EFFECTIVE_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    degraded: bool
    effective_capabilities: ExecutionCapabilities
    reasons: _containers.RepeatedCompositeFieldContainer[NegotiationReason]
    supported: bool
    def __init__(self, supported: bool = ..., degraded: bool = ..., reasons: _Optional[_Iterable[_Union[NegotiationReason, _Mapping]]] = ..., effective_capabilities: _Optional[_Union[ExecutionCapabilities, _Mapping]] = ...) -> None: ...

class ExecutionRequest(_message.Message):
    __slots__ = ["agent", "correlation", "history", "input", "metadata", "requirements", "resume", "schema_version", "state", "tools"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    agent: ExecutionAgent
    correlation: Correlation
    history: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    input: _message_pb2.Message
    metadata: _struct_pb2.Struct
    requirements: ExecutionRequirements
    resume: Resume
    schema_version: int
    state: _struct_pb2.Struct
    tools: _containers.RepeatedCompositeFieldContainer[ToolDescriptor]
    def __init__(self, schema_version: _Optional[int] = ..., correlation: _Optional[_Union[Correlation, _Mapping]] = ..., agent: _Optional[_Union[ExecutionAgent, _Mapping]] = ..., history: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., input: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., resume: _Optional[_Union[Resume, _Mapping]] = ..., requirements: _Optional[_Union[ExecutionRequirements, _Mapping]] = ..., tools: _Optional[_Iterable[_Union[ToolDescriptor, _Mapping]]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ExecutionRequirements(_message.Message):
    __slots__ = ["approval_interrupts", "attachments", "continuation_support", "max_elapsed_ms", "streaming", "structured_tool_calls", "tool_use", "trace_depth"]
    APPROVAL_INTERRUPTS_FIELD_NUMBER: _ClassVar[int]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    CONTINUATION_SUPPORT_FIELD_NUMBER: _ClassVar[int]
    MAX_ELAPSED_MS_FIELD_NUMBER: _ClassVar[int]
    STREAMING_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_USE_FIELD_NUMBER: _ClassVar[int]
    TRACE_DEPTH_FIELD_NUMBER: _ClassVar[int]
    approval_interrupts: Requirement
    attachments: Requirement
    continuation_support: Requirement
    max_elapsed_ms: int
    streaming: Requirement
    structured_tool_calls: Requirement
    tool_use: Requirement
    trace_depth: TraceDepth
    def __init__(self, tool_use: _Optional[_Union[Requirement, str]] = ..., structured_tool_calls: _Optional[_Union[Requirement, str]] = ..., continuation_support: _Optional[_Union[Requirement, str]] = ..., approval_interrupts: _Optional[_Union[Requirement, str]] = ..., trace_depth: _Optional[_Union[TraceDepth, str]] = ..., attachments: _Optional[_Union[Requirement, str]] = ..., streaming: _Optional[_Union[Requirement, str]] = ..., max_elapsed_ms: _Optional[int] = ...) -> None: ...

class ExecutionResult(_message.Message):
    __slots__ = ["backend_id", "cancelled", "completed", "degradation", "failed", "messages", "schema_version", "state", "suspended", "trace", "usage"]
    BACKEND_ID_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    DEGRADATION_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    backend_id: str
    cancelled: ExecutionCancelled
    completed: ExecutionCompleted
    degradation: _containers.RepeatedCompositeFieldContainer[NegotiationReason]
    failed: ExecutionFailed
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    schema_version: int
    state: _struct_pb2.Struct
    suspended: ExecutionSuspended
    trace: TraceSummary
    usage: Usage
    def __init__(self, schema_version: _Optional[int] = ..., backend_id: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., completed: _Optional[_Union[ExecutionCompleted, _Mapping]] = ..., suspended: _Optional[_Union[ExecutionSuspended, _Mapping]] = ..., failed: _Optional[_Union[ExecutionFailed, _Mapping]] = ..., cancelled: _Optional[_Union[ExecutionCancelled, _Mapping]] = ..., degradation: _Optional[_Iterable[_Union[NegotiationReason, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., trace: _Optional[_Union[TraceSummary, _Mapping]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ExecutionSuspended(_message.Message):
    __slots__ = ["approval_request", "checkpoint", "kind", "metadata", "reason", "signal_label"]
    APPROVAL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_LABEL_FIELD_NUMBER: _ClassVar[int]
    approval_request: ApprovalRequest
    checkpoint: _struct_pb2.Value
    kind: SuspensionKind
    metadata: _struct_pb2.Struct
    reason: SuspensionReason
    signal_label: str
    def __init__(self, signal_label: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., kind: _Optional[_Union[SuspensionKind, str]] = ..., checkpoint: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., reason: _Optional[_Union[SuspensionReason, str]] = ..., approval_request: _Optional[_Union[ApprovalRequest, _Mapping]] = ...) -> None: ...

class NegotiationReason(_message.Message):
    __slots__ = ["code", "message", "metadata", "severity"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    code: ReasonCode
    message: str
    metadata: _struct_pb2.Struct
    severity: Severity
    def __init__(self, code: _Optional[_Union[ReasonCode, str]] = ..., message: _Optional[str] = ..., severity: _Optional[_Union[Severity, str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Resume(_message.Message):
    __slots__ = ["checkpoint", "payload"]
    CHECKPOINT_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    checkpoint: _struct_pb2.Value
    payload: _struct_pb2.Value
    def __init__(self, checkpoint: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., payload: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Routed(_message.Message):
    __slots__ = ["attempt", "backend_id", "degraded", "reasons", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    BACKEND_ID_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    backend_id: str
    degraded: bool
    reasons: _containers.RepeatedCompositeFieldContainer[NegotiationReason]
    worker_id: str
    def __init__(self, backend_id: _Optional[str] = ..., worker_id: _Optional[str] = ..., attempt: _Optional[int] = ..., degraded: bool = ..., reasons: _Optional[_Iterable[_Union[NegotiationReason, _Mapping]]] = ...) -> None: ...

class RoutingPolicy(_message.Message):
    __slots__ = ["allowed_backends", "pinned_backend", "preference", "requirements"]
    ALLOWED_BACKENDS_FIELD_NUMBER: _ClassVar[int]
    PINNED_BACKEND_FIELD_NUMBER: _ClassVar[int]
    PREFERENCE_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    allowed_backends: _containers.RepeatedScalarFieldContainer[str]
    pinned_backend: str
    preference: RoutingPreference
    requirements: ExecutionRequirements
    def __init__(self, allowed_backends: _Optional[_Iterable[str]] = ..., pinned_backend: _Optional[str] = ..., preference: _Optional[_Union[RoutingPreference, str]] = ..., requirements: _Optional[_Union[ExecutionRequirements, _Mapping]] = ...) -> None: ...

class StepFinished(_message.Message):
    __slots__ = ["iteration", "usage"]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    iteration: int
    usage: Usage
    def __init__(self, iteration: _Optional[int] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ["index", "text"]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    index: int
    text: str
    def __init__(self, text: _Optional[str] = ..., index: _Optional[int] = ...) -> None: ...

class ThinkingDelta(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolCallDelta(_message.Message):
    __slots__ = ["args_delta", "name", "tool_call_id"]
    ARGS_DELTA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    args_delta: str
    name: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., args_delta: _Optional[str] = ...) -> None: ...

class ToolDescriptor(_message.Message):
    __slots__ = ["description", "input_schema", "metadata", "name", "requires_approval"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    description: str
    input_schema: _struct_pb2.Struct
    metadata: _struct_pb2.Struct
    name: str
    requires_approval: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., requires_approval: bool = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ToolFinished(_message.Message):
    __slots__ = ["name", "outcome", "tool_call_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    outcome: ToolOutcome
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., outcome: _Optional[_Union[ToolOutcome, str]] = ...) -> None: ...

class ToolStarted(_message.Message):
    __slots__ = ["input", "mcp_server", "name", "tool_call_id"]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    MCP_SERVER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    input: _struct_pb2.Value
    mcp_server: str
    name: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., mcp_server: _Optional[str] = ...) -> None: ...

class TraceSummary(_message.Message):
    __slots__ = ["completed_at", "degraded", "started_at", "step_count", "tool_call_count"]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STEP_COUNT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_COUNT_FIELD_NUMBER: _ClassVar[int]
    completed_at: _timestamp_pb2.Timestamp
    degraded: bool
    started_at: _timestamp_pb2.Timestamp
    step_count: int
    tool_call_count: int
    def __init__(self, started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., step_count: _Optional[int] = ..., tool_call_count: _Optional[int] = ..., degraded: bool = ...) -> None: ...

class TurnFinished(_message.Message):
    __slots__ = ["result"]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    result: ExecutionResult
    def __init__(self, result: _Optional[_Union[ExecutionResult, _Mapping]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cost_units", "input_tokens", "latency_ms", "output_tokens"]
    COST_UNITS_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    cost_units: float
    input_tokens: int
    latency_ms: int
    output_tokens: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cost_units: _Optional[float] = ..., latency_ms: _Optional[int] = ...) -> None: ...

class RoutingPreference(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Requirement(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TraceDepth(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolUseSupport(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ContinuationSupport(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ApprovalInterrupts(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class StreamingSupport(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ContextStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ReasonCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Severity(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SuspensionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SuspensionReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
