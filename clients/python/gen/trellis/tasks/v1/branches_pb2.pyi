from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

BRANCH_KIND_SANDBOX: BranchKind
BRANCH_KIND_SESSION: BranchKind
BRANCH_KIND_TASK: BranchKind
BRANCH_KIND_UNSPECIFIED: BranchKind
BRANCH_KIND_WORKSPACE: BranchKind
DESCRIPTOR: _descriptor.FileDescriptor

class Branch(_message.Message):
    __slots__ = ["base_ref", "created_at", "created_by", "forked_from_event_id", "forked_from_message_id", "forked_message_count", "id", "kind", "merged_into", "metadata", "parent_branch_id", "parent_session_id", "session_id", "task_id", "updated_at", "workspace_id"]
    BASE_REF_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    FORKED_MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MERGED_INTO_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PARENT_BRANCH_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    base_ref: str
    created_at: _timestamp_pb2.Timestamp
    created_by: str
    forked_from_event_id: str
    forked_from_message_id: str
    forked_message_count: int
    id: str
    kind: BranchKind
    merged_into: str
    metadata: _struct_pb2.Struct
    parent_branch_id: str
    parent_session_id: str
    session_id: str
    task_id: str
    updated_at: _timestamp_pb2.Timestamp
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., kind: _Optional[_Union[BranchKind, str]] = ..., base_ref: _Optional[str] = ..., parent_branch_id: _Optional[str] = ..., parent_session_id: _Optional[str] = ..., session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., forked_from_event_id: _Optional[str] = ..., forked_from_message_id: _Optional[str] = ..., forked_message_count: _Optional[int] = ..., created_by: _Optional[str] = ..., merged_into: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class CreateBranchRequest(_message.Message):
    __slots__ = ["base_ref", "idempotency_key", "kind", "metadata", "parent_branch_id", "session_id", "task_id"]
    BASE_REF_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PARENT_BRANCH_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    base_ref: str
    idempotency_key: str
    kind: BranchKind
    metadata: _struct_pb2.Struct
    parent_branch_id: str
    session_id: str
    task_id: str
    def __init__(self, session_id: _Optional[str] = ..., kind: _Optional[_Union[BranchKind, str]] = ..., base_ref: _Optional[str] = ..., parent_branch_id: _Optional[str] = ..., task_id: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CreateBranchResponse(_message.Message):
    __slots__ = ["branch"]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    branch: Branch
    def __init__(self, branch: _Optional[_Union[Branch, _Mapping]] = ...) -> None: ...

class GetBranchRequest(_message.Message):
    __slots__ = ["branch_id"]
    BRANCH_ID_FIELD_NUMBER: _ClassVar[int]
    branch_id: str
    def __init__(self, branch_id: _Optional[str] = ...) -> None: ...

class GetBranchResponse(_message.Message):
    __slots__ = ["branch"]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    branch: Branch
    def __init__(self, branch: _Optional[_Union[Branch, _Mapping]] = ...) -> None: ...

class ListBranchesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListBranchesResponse(_message.Message):
    __slots__ = ["branches", "next_page_token"]
    BRANCHES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    branches: _containers.RepeatedCompositeFieldContainer[Branch]
    next_page_token: str
    def __init__(self, branches: _Optional[_Iterable[_Union[Branch, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class BranchKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
