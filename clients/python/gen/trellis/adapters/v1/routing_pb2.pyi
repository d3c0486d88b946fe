from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trellis.adapters.v1 import execution_pb2 as _execution_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BackendHints(_message.Message):
    __slots__ = ["cost_per_execution", "latency_ms"]
    COST_PER_EXECUTION_FIELD_NUMBER: _ClassVar[int]
    LATENCY_MS_FIELD_NUMBER: _ClassVar[int]
    cost_per_execution: float
    latency_ms: int
    def __init__(self, cost_per_execution: _Optional[float] = ..., latency_ms: _Optional[int] = ...) -> None: ...

class BackendNegotiation(_message.Message):
    __slots__ = ["backend_id", "negotiation"]
    BACKEND_ID_FIELD_NUMBER: _ClassVar[int]
    NEGOTIATION_FIELD_NUMBER: _ClassVar[int]
    backend_id: str
    negotiation: _execution_pb2.ExecutionNegotiation
    def __init__(self, backend_id: _Optional[str] = ..., negotiation: _Optional[_Union[_execution_pb2.ExecutionNegotiation, _Mapping]] = ...) -> None: ...

class BackendStatus(_message.Message):
    __slots__ = ["backend_id", "capabilities", "hints", "in_process", "workers"]
    BACKEND_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    HINTS_FIELD_NUMBER: _ClassVar[int]
    IN_PROCESS_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    backend_id: str
    capabilities: _execution_pb2.ExecutionCapabilities
    hints: BackendHints
    in_process: bool
    workers: _containers.RepeatedCompositeFieldContainer[WorkerStatus]
    def __init__(self, backend_id: _Optional[str] = ..., capabilities: _Optional[_Union[_execution_pb2.ExecutionCapabilities, _Mapping]] = ..., hints: _Optional[_Union[BackendHints, _Mapping]] = ..., in_process: bool = ..., workers: _Optional[_Iterable[_Union[WorkerStatus, _Mapping]]] = ...) -> None: ...

class DeregisterBackendRequest(_message.Message):
    __slots__ = ["worker_id"]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ...) -> None: ...

class DeregisterBackendResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ExecuteRequest(_message.Message):
    __slots__ = ["request"]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _execution_pb2.ExecutionRequest
    def __init__(self, request: _Optional[_Union[_execution_pb2.ExecutionRequest, _Mapping]] = ...) -> None: ...

class ExecuteResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _execution_pb2.ExecutionEvent
    def __init__(self, event: _Optional[_Union[_execution_pb2.ExecutionEvent, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ["in_flight", "worker_id"]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    in_flight: int
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., in_flight: _Optional[int] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ["ttl_ms"]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    ttl_ms: int
    def __init__(self, ttl_ms: _Optional[int] = ...) -> None: ...

class ListBackendsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListBackendsResponse(_message.Message):
    __slots__ = ["backends"]
    BACKENDS_FIELD_NUMBER: _ClassVar[int]
    backends: _containers.RepeatedCompositeFieldContainer[BackendStatus]
    def __init__(self, backends: _Optional[_Iterable[_Union[BackendStatus, _Mapping]]] = ...) -> None: ...

class NegotiateRequest(_message.Message):
    __slots__ = ["request"]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    request: _execution_pb2.ExecutionRequest
    def __init__(self, request: _Optional[_Union[_execution_pb2.ExecutionRequest, _Mapping]] = ...) -> None: ...

class NegotiateResponse(_message.Message):
    __slots__ = ["decision"]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    decision: RoutingDecision
    def __init__(self, decision: _Optional[_Union[RoutingDecision, _Mapping]] = ...) -> None: ...

class RegisterBackendRequest(_message.Message):
    __slots__ = ["worker"]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    worker: WorkerRegistration
    def __init__(self, worker: _Optional[_Union[WorkerRegistration, _Mapping]] = ...) -> None: ...

class RegisterBackendResponse(_message.Message):
    __slots__ = ["ttl_ms"]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    ttl_ms: int
    def __init__(self, ttl_ms: _Optional[int] = ...) -> None: ...

class RoutingDecision(_message.Message):
    __slots__ = ["backend_id", "candidates", "degraded", "reasons", "supported"]
    BACKEND_ID_FIELD_NUMBER: _ClassVar[int]
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    DEGRADED_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    SUPPORTED_FIELD_NUMBER: _ClassVar[int]
    backend_id: str
    candidates: _containers.RepeatedCompositeFieldContainer[BackendNegotiation]
    degraded: bool
    reasons: _containers.RepeatedCompositeFieldContainer[_execution_pb2.NegotiationReason]
    supported: bool
    def __init__(self, backend_id: _Optional[str] = ..., supported: bool = ..., degraded: bool = ..., reasons: _Optional[_Iterable[_Union[_execution_pb2.NegotiationReason, _Mapping]]] = ..., candidates: _Optional[_Iterable[_Union[BackendNegotiation, _Mapping]]] = ...) -> None: ...

class WorkerRegistration(_message.Message):
    __slots__ = ["backend_id", "capabilities", "capacity", "direct_offers", "heartbeat_interval_ms", "hints", "in_flight", "leaving", "schema_version", "worker_id"]
    BACKEND_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    DIRECT_OFFERS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HINTS_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    backend_id: str
    capabilities: _execution_pb2.ExecutionCapabilities
    capacity: int
    direct_offers: bool
    heartbeat_interval_ms: int
    hints: BackendHints
    in_flight: int
    leaving: bool
    schema_version: int
    worker_id: str
    def __init__(self, schema_version: _Optional[int] = ..., worker_id: _Optional[str] = ..., backend_id: _Optional[str] = ..., capabilities: _Optional[_Union[_execution_pb2.ExecutionCapabilities, _Mapping]] = ..., capacity: _Optional[int] = ..., in_flight: _Optional[int] = ..., hints: _Optional[_Union[BackendHints, _Mapping]] = ..., heartbeat_interval_ms: _Optional[int] = ..., leaving: bool = ..., direct_offers: bool = ...) -> None: ...

class WorkerStatus(_message.Message):
    __slots__ = ["capacity", "in_flight", "last_seen", "worker_id"]
    CAPACITY_FIELD_NUMBER: _ClassVar[int]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEEN_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    capacity: int
    in_flight: int
    last_seen: _timestamp_pb2.Timestamp
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., capacity: _Optional[int] = ..., in_flight: _Optional[int] = ..., last_seen: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
