from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trellis.adapters.v1 import execution_pb2 as _execution_pb2
from trellis.adapters.v1 import vaults_pb2 as _vaults_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CancelNotice(_message.Message):
    __slots__ = ["execution_id", "reason"]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    reason: str
    def __init__(self, execution_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class ClaimRequest(_message.Message):
    __slots__ = ["attempt", "execution_id", "negotiation", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    NEGOTIATION_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    execution_id: str
    negotiation: _execution_pb2.ExecutionNegotiation
    worker_id: str
    def __init__(self, execution_id: _Optional[str] = ..., attempt: _Optional[int] = ..., worker_id: _Optional[str] = ..., negotiation: _Optional[_Union[_execution_pb2.ExecutionNegotiation, _Mapping]] = ...) -> None: ...

class ClaimResponse(_message.Message):
    __slots__ = ["granted", "reason"]
    GRANTED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    granted: bool
    reason: str
    def __init__(self, granted: bool = ..., reason: _Optional[str] = ...) -> None: ...

class SecretsRequest(_message.Message):
    __slots__ = ["attempt", "execution_id", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    execution_id: str
    worker_id: str
    def __init__(self, execution_id: _Optional[str] = ..., attempt: _Optional[int] = ..., worker_id: _Optional[str] = ...) -> None: ...

class SecretsResponse(_message.Message):
    __slots__ = ["error", "vaults"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VAULTS_FIELD_NUMBER: _ClassVar[int]
    error: str
    vaults: _containers.RepeatedCompositeFieldContainer[_vaults_pb2.VaultGrant]
    def __init__(self, vaults: _Optional[_Iterable[_Union[_vaults_pb2.VaultGrant, _Mapping]]] = ..., error: _Optional[str] = ...) -> None: ...

class WorkItem(_message.Message):
    __slots__ = ["attempt", "deadline", "execution_id", "reply_to", "request"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    REPLY_TO_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    deadline: _timestamp_pb2.Timestamp
    execution_id: str
    reply_to: str
    request: _execution_pb2.ExecutionRequest
    def __init__(self, execution_id: _Optional[str] = ..., attempt: _Optional[int] = ..., request: _Optional[_Union[_execution_pb2.ExecutionRequest, _Mapping]] = ..., reply_to: _Optional[str] = ..., deadline: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class WorkerReleased(_message.Message):
    __slots__ = ["reason", "unclaimed"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    UNCLAIMED_FIELD_NUMBER: _ClassVar[int]
    reason: str
    unclaimed: bool
    def __init__(self, reason: _Optional[str] = ..., unclaimed: bool = ...) -> None: ...

class WorkerReport(_message.Message):
    __slots__ = ["attempt", "before", "event", "execution_id", "released", "worker_id"]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    BEFORE_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    WORKER_ID_FIELD_NUMBER: _ClassVar[int]
    attempt: int
    before: _containers.RepeatedCompositeFieldContainer[_execution_pb2.ExecutionEvent]
    event: _execution_pb2.ExecutionEvent
    execution_id: str
    released: WorkerReleased
    worker_id: str
    def __init__(self, execution_id: _Optional[str] = ..., attempt: _Optional[int] = ..., worker_id: _Optional[str] = ..., event: _Optional[_Union[_execution_pb2.ExecutionEvent, _Mapping]] = ..., released: _Optional[_Union[WorkerReleased, _Mapping]] = ..., before: _Optional[_Iterable[_Union[_execution_pb2.ExecutionEvent, _Mapping]]] = ...) -> None: ...
