from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trellis.core.v1 import error_pb2 as _error_pb2
from trellis.core.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

ACTOR_KIND_AGENT: ActorKind
ACTOR_KIND_CONNECTOR: ActorKind
ACTOR_KIND_SERVICE: ActorKind
ACTOR_KIND_SYSTEM: ActorKind
ACTOR_KIND_UNSPECIFIED: ActorKind
ACTOR_KIND_USER: ActorKind
DESCRIPTOR: _descriptor.FileDescriptor
SESSION_STATE_ACTIVE: SessionState
SESSION_STATE_CLOSED: SessionState
SESSION_STATE_FAILED: SessionState
SESSION_STATE_IDLE: SessionState
SESSION_STATE_PAUSED: SessionState
SESSION_STATE_UNSPECIFIED: SessionState
TASK_STATUS_AUTH_REQUIRED: TaskStatus
TASK_STATUS_CANCELED: TaskStatus
TASK_STATUS_COMPLETED: TaskStatus
TASK_STATUS_FAILED: TaskStatus
TASK_STATUS_INPUT_REQUIRED: TaskStatus
TASK_STATUS_SUBMITTED: TaskStatus
TASK_STATUS_UNSPECIFIED: TaskStatus
TASK_STATUS_WORKING: TaskStatus

class Actor(_message.Message):
    __slots__ = ["display_name", "id", "kind"]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    display_name: str
    id: str
    kind: ActorKind
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[_Union[ActorKind, str]] = ..., display_name: _Optional[str] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ["actor", "created_at", "id", "idempotency_key", "kind", "payload", "previous_event_id", "receipt_id", "resource", "sequence", "session_id", "span_id", "task_id", "trace_id", "workspace_id"]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    actor: Actor
    created_at: _timestamp_pb2.Timestamp
    id: str
    idempotency_key: str
    kind: str
    payload: EventPayload
    previous_event_id: str
    receipt_id: str
    resource: ResourceRef
    sequence: int
    session_id: str
    span_id: str
    task_id: str
    trace_id: str
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., resource: _Optional[_Union[ResourceRef, _Mapping]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., sequence: _Optional[int] = ..., payload: _Optional[_Union[EventPayload, _Mapping]] = ..., trace_id: _Optional[str] = ..., span_id: _Optional[str] = ..., session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., actor: _Optional[_Union[Actor, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., previous_event_id: _Optional[str] = ..., receipt_id: _Optional[str] = ...) -> None: ...

class EventPayload(_message.Message):
    __slots__ = ["data", "message_appended", "session_state_changed", "signal_delivered", "task_status_changed"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_APPENDED_FIELD_NUMBER: _ClassVar[int]
    SESSION_STATE_CHANGED_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    TASK_STATUS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    data: _struct_pb2.Struct
    message_appended: MessageAppended
    session_state_changed: SessionStateChanged
    signal_delivered: SignalDelivered
    task_status_changed: TaskStatusChanged
    def __init__(self, data: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., message_appended: _Optional[_Union[MessageAppended, _Mapping]] = ..., task_status_changed: _Optional[_Union[TaskStatusChanged, _Mapping]] = ..., session_state_changed: _Optional[_Union[SessionStateChanged, _Mapping]] = ..., signal_delivered: _Optional[_Union[SignalDelivered, _Mapping]] = ...) -> None: ...

class MessageAppended(_message.Message):
    __slots__ = ["message", "position"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    message: _message_pb2.Message
    position: int
    def __init__(self, message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., position: _Optional[int] = ...) -> None: ...

class ResourceRef(_message.Message):
    __slots__ = ["id", "object"]
    ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    id: str
    object: str
    def __init__(self, object: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class SessionStateChanged(_message.Message):
    __slots__ = ["previous_state", "reason", "state"]
    PREVIOUS_STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    previous_state: SessionState
    reason: str
    state: SessionState
    def __init__(self, state: _Optional[_Union[SessionState, str]] = ..., previous_state: _Optional[_Union[SessionState, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class SignalDelivered(_message.Message):
    __slots__ = ["payload", "signal_id"]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    payload: _struct_pb2.Value
    signal_id: str
    def __init__(self, signal_id: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class TaskStatusChanged(_message.Message):
    __slots__ = ["agent_id", "failure", "previous_status", "reason", "status"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_STATUS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    failure: _error_pb2.ErrorDetail
    previous_status: TaskStatus
    reason: str
    status: TaskStatus
    def __init__(self, status: _Optional[_Union[TaskStatus, str]] = ..., previous_status: _Optional[_Union[TaskStatus, str]] = ..., reason: _Optional[str] = ..., failure: _Optional[_Union[_error_pb2.ErrorDetail, _Mapping]] = ..., agent_id: _Optional[str] = ...) -> None: ...

class ActorKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class TaskStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SessionState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
