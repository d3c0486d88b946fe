from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetQuotaRequest(_message.Message):
    __slots__ = ["quota_id"]
    QUOTA_ID_FIELD_NUMBER: _ClassVar[int]
    quota_id: str
    def __init__(self, quota_id: _Optional[str] = ...) -> None: ...

class GetQuotaResponse(_message.Message):
    __slots__ = ["quota"]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    quota: Quota
    def __init__(self, quota: _Optional[_Union[Quota, _Mapping]] = ...) -> None: ...

class ListQuotasRequest(_message.Message):
    __slots__ = ["workspace_id"]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class ListQuotasResponse(_message.Message):
    __slots__ = ["quotas"]
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    quotas: _containers.RepeatedCompositeFieldContainer[Quota]
    def __init__(self, quotas: _Optional[_Iterable[_Union[Quota, _Mapping]]] = ...) -> None: ...

class Quota(_message.Message):
    __slots__ = ["exhaustion_reason", "hard_limit", "id", "limit", "name", "reset_at", "scope", "usage", "workspace_id"]
    EXHAUSTION_REASON_FIELD_NUMBER: _ClassVar[int]
    HARD_LIMIT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESET_AT_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    exhaustion_reason: str
    hard_limit: bool
    id: str
    limit: float
    name: str
    reset_at: _timestamp_pb2.Timestamp
    scope: str
    usage: float
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., scope: _Optional[str] = ..., name: _Optional[str] = ..., limit: _Optional[float] = ..., usage: _Optional[float] = ..., reset_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., hard_limit: bool = ..., exhaustion_reason: _Optional[str] = ...) -> None: ...
