from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
MEMORY_SCOPE_PERSONA: MemoryScope
MEMORY_SCOPE_SESSION: MemoryScope
MEMORY_SCOPE_TENANT: MemoryScope
MEMORY_SCOPE_UNSPECIFIED: MemoryScope
MEMORY_SCOPE_WORKSPACE: MemoryScope

class CreateMemoryRequest(_message.Message):
    __slots__ = ["content", "idempotency_key", "metadata", "owner_id", "provenance", "scope", "workspace_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    content: _struct_pb2.Value
    idempotency_key: str
    metadata: _struct_pb2.Struct
    owner_id: str
    provenance: _struct_pb2.Struct
    scope: MemoryScope
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., scope: _Optional[_Union[MemoryScope, str]] = ..., owner_id: _Optional[str] = ..., content: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., provenance: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CreateMemoryResponse(_message.Message):
    __slots__ = ["memory", "replayed"]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    replayed: bool
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., replayed: bool = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ["memory_id"]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    def __init__(self, memory_id: _Optional[str] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetMemoryRequest(_message.Message):
    __slots__ = ["memory_id"]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    def __init__(self, memory_id: _Optional[str] = ...) -> None: ...

class GetMemoryResponse(_message.Message):
    __slots__ = ["memory"]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ["owner_id", "page_size", "page_token", "scope", "session_id", "workspace_id"]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    owner_id: str
    page_size: int
    page_token: str
    scope: MemoryScope
    session_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., scope: _Optional[_Union[MemoryScope, str]] = ..., owner_id: _Optional[str] = ..., session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ["memories", "next_page_token"]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[Memory]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ["content", "created_at", "id", "metadata", "owner_id", "provenance", "scope", "updated_at", "workspace_id"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    OWNER_ID_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    content: _struct_pb2.Value
    created_at: _timestamp_pb2.Timestamp
    id: str
    metadata: _struct_pb2.Struct
    owner_id: str
    provenance: _struct_pb2.Struct
    scope: MemoryScope
    updated_at: _timestamp_pb2.Timestamp
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., scope: _Optional[_Union[MemoryScope, str]] = ..., owner_id: _Optional[str] = ..., content: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., provenance: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class MemoryScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
