from google.protobuf import any_pb2 as _any_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BlockingReason(_message.Message):
    __slots__ = ["backend_id", "capability", "code", "message", "severity"]
    BACKEND_ID_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    backend_id: str
    capability: str
    code: str
    message: str
    severity: str
    def __init__(self, backend_id: _Optional[str] = ..., capability: _Optional[str] = ..., code: _Optional[str] = ..., severity: _Optional[str] = ..., message: _Optional[str] = ...) -> None: ...

class BlockingReasons(_message.Message):
    __slots__ = ["category", "omitted", "reasons", "retryable"]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    OMITTED_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    category: str
    omitted: int
    reasons: _containers.RepeatedCompositeFieldContainer[BlockingReason]
    retryable: bool
    def __init__(self, category: _Optional[str] = ..., reasons: _Optional[_Iterable[_Union[BlockingReason, _Mapping]]] = ..., omitted: _Optional[int] = ..., retryable: bool = ...) -> None: ...

class ErrorDetail(_message.Message):
    __slots__ = ["domain", "metadata", "param", "reason"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    DOMAIN_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PARAM_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    domain: str
    metadata: _containers.ScalarMap[str, str]
    param: str
    reason: str
    def __init__(self, reason: _Optional[str] = ..., domain: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., param: _Optional[str] = ...) -> None: ...

class RpcStatus(_message.Message):
    __slots__ = ["code", "details", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    details: _containers.RepeatedCompositeFieldContainer[_any_pb2.Any]
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., details: _Optional[_Iterable[_Union[_any_pb2.Any, _Mapping]]] = ...) -> None: ...
