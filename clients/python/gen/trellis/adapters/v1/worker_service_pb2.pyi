from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trellis.adapters.v1 import execution_pb2 as _execution_pb2
from trellis.adapters.v1 import routing_pb2 as _routing_pb2
from trellis.adapters.v1 import vaults_pb2 as _vaults_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CancelWork(_message.Message):
    __slots__ = ["attempt", "execution_id", "reason"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    execution_id: str
    reason: str
    def __init__(self, execution_id: _Optional[str] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class ClaimWorkRequest(_message.Message):
    __slots__ = ["negotiation", "work"]
    NEGOTIATION_FIELD_NUMBER: _ClassVar[int]
    WORK_FIELD_NUMBER: _ClassVar[int]
    negotiation: _execution_pb2.ExecutionNegotiation
    work: WorkRef
    def __init__(self, work: _Optional[_Union[WorkRef, _Mapping]] = ..., negotiation: _Optional[_Union[_execution_pb2.ExecutionNegotiation, _Mapping]] = ...) -> None: ...

class ClaimWorkResponse(_message.Message):
    __slots__ = ["granted", "reason"]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    reason: str
    def __init__(self, granted: bool = ..., reason: _Optional[str] = ...) -> None: ...

class CompleteWorkRequest(_message.Message):
    __slots__ = ["events", "result", "work"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    WORK_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_execution_pb2.ExecutionEvent]
    result: _execution_pb2.ExecutionResult
    work: WorkRef
    def __init__(self, work: _Optional[_Union[WorkRef, _Mapping]] = ..., result: _Optional[_Union[_execution_pb2.ExecutionResult, _Mapping]] = ..., events: _Optional[_Iterable[_Union[_execution_pb2.ExecutionEvent, _Mapping]]] = ...) -> None: ...

class CompleteWorkResponse(_message.Message):
    __slots__ = ["accepted"]
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    def __init__(self, accepted: bool = ...) -> None: ...

class ConnectWorkerRequest(_message.Message):
    __slots__ = ["worker"]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    worker: _routing_pb2.WorkerRegistration
    def __init__(self, worker: _Optional[_Union[_routing_pb2.WorkerRegistration, _Mapping]] = ...) -> None: ...

class ConnectWorkerResponse(_message.Message):
    __slots__ = ["cancel", "connected", "offer"]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    OFFER_FIELD_NUMBER: _ClassVar[int]
    cancel: CancelWork
    connected: WorkerConnected
    offer: WorkOffer
    def __init__(self, connected: _Optional[_Union[WorkerConnected, _Mapping]] = ..., offer: _Optional[_Union[WorkOffer, _Mapping]] = ..., cancel: _Optional[_Union[CancelWork, _Mapping]] = ...) -> None: ...

class DisconnectWorkerRequest(_message.Message):
    __slots__ = ["session", "worker_id"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    session: str
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., session: _Optional[str] = ...) -> None: ...

class DisconnectWorkerResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetWorkSecretsRequest(_message.Message):
    __slots__ = ["work"]
    WORK_FIELD_NUMBER: _ClassVar[int]
    work: WorkRef
    def __init__(self, work: _Optional[_Union[WorkRef, _Mapping]] = ...) -> None: ...

class GetWorkSecretsResponse(_message.Message):
    __slots__ = ["vaults"]
    VAULTS_FIELD_NUMBER: _ClassVar[int]
    vaults: _containers.RepeatedCompositeFieldContainer[_vaults_pb2.VaultGrant]
    def __init__(self, vaults: _Optional[_Iterable[_Union[_vaults_pb2.VaultGrant, _Mapping]]] = ...) -> None: ...

class ReportWorkEventsRequest(_message.Message):
    __slots__ = ["events", "work"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    WORK_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_execution_pb2.ExecutionEvent]
    work: WorkRef
    def __init__(self, work: _Optional[_Union[WorkRef, _Mapping]] = ..., events: _Optional[_Iterable[_Union[_execution_pb2.ExecutionEvent, _Mapping]]] = ...) -> None: ...

class ReportWorkEventsResponse(_message.Message):
    __slots__ = ["current"]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    current: bool
    def __init__(self, current: bool = ...) -> None: ...

class WorkOffer(_message.Message):
    __slots__ = ["attempt", "deadline", "execution_id", "request"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    deadline: _timestamp_pb2.Timestamp
    execution_id: str
    request: _execution_pb2.ExecutionRequest
    def __init__(self, execution_id: _Optional[str] = ..., attempt: _Optional[int] = ..., request: _Optional[_Union[_execution_pb2.ExecutionRequest, _Mapping]] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WorkRef(_message.Message):
    __slots__ = ["attempt", "execution_id", "session", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    execution_id: str
    session: str
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., session: _Optional[str] = ..., execution_id: _Optional[str] = ..., attempt: _Optional[int] = ...) -> None: ...

class WorkerCallError(_message.Message):
    __slots__ = ["code", "message", "param", "reason"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PARAM_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    param: str
    reason: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., reason: _Optional[str] = ..., param: _Optional[str] = ...) -> None: ...

class WorkerChannelRequest(_message.Message):
    __slots__ = ["call_id", "claim", "complete", "connect", "heartbeat", "report"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    CONNECT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    call_id: int
    claim: ClaimWorkRequest
    complete: CompleteWorkRequest
    connect: ConnectWorkerRequest
    heartbeat: WorkerHeartbeatRequest
    report: ReportWorkEventsRequest
    def __init__(self, call_id: _Optional[int] = ..., connect: _Optional[_Union[ConnectWorkerRequest, _Mapping]] = ..., claim: _Optional[_Union[ClaimWorkRequest, _Mapping]] = ..., report: _Optional[_Union[ReportWorkEventsRequest, _Mapping]] = ..., complete: _Optional[_Union[CompleteWorkRequest, _Mapping]] = ..., heartbeat: _Optional[_Union[WorkerHeartbeatRequest, _Mapping]] = ...) -> None: ...

class WorkerChannelResponse(_message.Message):
    __slots__ = ["beat", "call_id", "claimed", "command", "completed", "error", "reported"]
    BEAT_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REPORTED_FIELD_NUMBER: _ClassVar[int]
    beat: WorkerHeartbeatResponse
    call_id: int
    claimed: ClaimWorkResponse
    command: ConnectWorkerResponse
    completed: CompleteWorkResponse
    error: WorkerCallError
    reported: ReportWorkEventsResponse
    def __init__(self, call_id: _Optional[int] = ..., command: _Optional[_Union[ConnectWorkerResponse, _Mapping]] = ..., claimed: _Optional[_Union[ClaimWorkResponse, _Mapping]] = ..., reported: _Optional[_Union[ReportWorkEventsResponse, _Mapping]] = ..., completed: _Optional[_Union[CompleteWorkResponse, _Mapping]] = ..., beat: _Optional[_Union[WorkerHeartbeatResponse, _Mapping]] = ..., error: _Optional[_Union[WorkerCallError, _Mapping]] = ...) -> None: ...

class WorkerConnected(_message.Message):
    __slots__ = ["session", "ttl_ms", "worker_id"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    session: str
    ttl_ms: int
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., session: _Optional[str] = ..., ttl_ms: _Optional[int] = ...) -> None: ...

class WorkerHeartbeatRequest(_message.Message):
    __slots__ = ["in_flight", "session", "worker_id"]
    IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    in_flight: int
    session: str
    worker_id: str
    def __init__(self, worker_id: _Optional[str] = ..., session: _Optional[str] = ..., in_flight: _Optional[int] = ...) -> None: ...

class WorkerHeartbeatResponse(_message.Message):
    __slots__ = ["ttl_ms"]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    ttl_ms: int
    def __init__(self, ttl_ms: _Optional[int] = ...) -> None: ...
