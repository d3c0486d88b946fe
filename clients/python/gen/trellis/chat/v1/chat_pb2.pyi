from google.protobuf import struct_pb2 as _struct_pb2
from trellis.adapters.v1 import execution_pb2 as _execution_pb2
from trellis.core.v1 import error_pb2 as _error_pb2
from trellis.core.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ERROR_BUCKET_RETRYABLE_TRANSIENT: ErrorBucket
ERROR_BUCKET_SESSION_TERMINATING: ErrorBucket
ERROR_BUCKET_UNSPECIFIED: ErrorBucket
ERROR_BUCKET_USER_CORRECTABLE: ErrorBucket
SUSPENSION_KIND_AUTH: SuspensionKind
SUSPENSION_KIND_INPUT: SuspensionKind
SUSPENSION_KIND_UNSPECIFIED: SuspensionKind
TOOL_CALL_PHASE_FINISHED: ToolCallPhase
TOOL_CALL_PHASE_STARTED: ToolCallPhase
TOOL_CALL_PHASE_UNSPECIFIED: ToolCallPhase

class ChatChunk(_message.Message):
    __slots__ = ["message", "text_delta", "thinking_delta", "tool_call_progress"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    THINKING_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    message: _message_pb2.Message
    text_delta: TextDelta
    thinking_delta: ThinkingDelta
    tool_call_progress: ToolCallProgress
    def __init__(self, text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., thinking_delta: _Optional[_Union[ThinkingDelta, _Mapping]] = ..., tool_call_progress: _Optional[_Union[ToolCallProgress, _Mapping]] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ...) -> None: ...

class ChatState(_message.Message):
    __slots__ = ["messages", "state"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    state: _struct_pb2.Struct
    def __init__(self, messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ChatTurnCompleted(_message.Message):
    __slots__ = ["final_state", "replies"]
    FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    REPLIES_FIELD_NUMBER: _ClassVar[int]
    final_state: ChatState
    replies: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    def __init__(self, replies: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., final_state: _Optional[_Union[ChatState, _Mapping]] = ...) -> None: ...

class ChatTurnErrored(_message.Message):
    __slots__ = ["blocking", "diagnostic", "error_bucket", "error_category", "partial_replies", "reply"]
    BLOCKING_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTIC_FIELD_NUMBER: _ClassVar[int]
    ERROR_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_CATEGORY_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_REPLIES_FIELD_NUMBER: _ClassVar[int]
    REPLY_FIELD_NUMBER: _ClassVar[int]
    blocking: _error_pb2.BlockingReasons
    diagnostic: str
    error_bucket: ErrorBucket
    error_category: str
    partial_replies: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    reply: _message_pb2.Message
    def __init__(self, error_bucket: _Optional[_Union[ErrorBucket, str]] = ..., error_category: _Optional[str] = ..., reply: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., diagnostic: _Optional[str] = ..., partial_replies: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., blocking: _Optional[_Union[_error_pb2.BlockingReasons, _Mapping]] = ...) -> None: ...

class ChatTurnOutcome(_message.Message):
    __slots__ = ["completed", "errored", "session_id", "suspended", "task_id"]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    ERRORED_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SUSPENDED_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    completed: ChatTurnCompleted
    errored: ChatTurnErrored
    session_id: str
    suspended: ChatTurnSuspended
    task_id: str
    def __init__(self, completed: _Optional[_Union[ChatTurnCompleted, _Mapping]] = ..., errored: _Optional[_Union[ChatTurnErrored, _Mapping]] = ..., suspended: _Optional[_Union[ChatTurnSuspended, _Mapping]] = ..., session_id: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class ChatTurnSuspended(_message.Message):
    __slots__ = ["invocation_id", "pending_messages", "signal_descriptor"]
    INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    PENDING_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    invocation_id: str
    pending_messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    signal_descriptor: SignalDescriptor
    def __init__(self, signal_descriptor: _Optional[_Union[SignalDescriptor, _Mapping]] = ..., pending_messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., invocation_id: _Optional[str] = ...) -> None: ...

class GetHistoryRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetHistoryResponse(_message.Message):
    __slots__ = ["messages", "next_page_token"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class SendRequest(_message.Message):
    __slots__ = ["agent_id", "idempotency_key", "include_final_state", "message", "requirements", "session_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    idempotency_key: str
    include_final_state: bool
    message: _message_pb2.Message
    requirements: _execution_pb2.ExecutionRequirements
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., agent_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., include_final_state: bool = ..., requirements: _Optional[_Union[_execution_pb2.ExecutionRequirements, _Mapping]] = ...) -> None: ...

class SendResponse(_message.Message):
    __slots__ = ["outcome"]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    outcome: ChatTurnOutcome
    def __init__(self, outcome: _Optional[_Union[ChatTurnOutcome, _Mapping]] = ...) -> None: ...

class SendStreamingRequest(_message.Message):
    __slots__ = ["agent_id", "idempotency_key", "include_final_state", "message", "requirements", "session_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    idempotency_key: str
    include_final_state: bool
    message: _message_pb2.Message
    requirements: _execution_pb2.ExecutionRequirements
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., agent_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ..., include_final_state: bool = ..., requirements: _Optional[_Union[_execution_pb2.ExecutionRequirements, _Mapping]] = ...) -> None: ...

class SendStreamingResponse(_message.Message):
    __slots__ = ["chunk", "outcome"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    chunk: ChatChunk
    outcome: ChatTurnOutcome
    def __init__(self, chunk: _Optional[_Union[ChatChunk, _Mapping]] = ..., outcome: _Optional[_Union[ChatTurnOutcome, _Mapping]] = ...) -> None: ...

class SignalDescriptor(_message.Message):
    __slots__ = ["global_signal_id", "kind", "metadata", "signal_id"]
    GLOBAL_SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    global_signal_id: str
    kind: SuspensionKind
    metadata: _struct_pb2.Struct
    signal_id: str
    def __init__(self, signal_id: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., kind: _Optional[_Union[SuspensionKind, str]] = ..., global_signal_id: _Optional[str] = ...) -> None: ...

class SubscribeRequest(_message.Message):
    __slots__ = ["after_cursor", "include_final_state", "session_id"]
    AFTER_CURSOR_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    after_cursor: str
    include_final_state: bool
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., after_cursor: _Optional[str] = ..., include_final_state: bool = ...) -> None: ...

class SubscribeResponse(_message.Message):
    __slots__ = ["cursor", "outcome", "subscribed"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    outcome: ChatTurnOutcome
    subscribed: Subscribed
    def __init__(self, subscribed: _Optional[_Union[Subscribed, _Mapping]] = ..., outcome: _Optional[_Union[ChatTurnOutcome, _Mapping]] = ..., cursor: _Optional[str] = ...) -> None: ...

class Subscribed(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ThinkingDelta(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolCallProgress(_message.Message):
    __slots__ = ["name", "phase", "status", "tool_call_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    phase: ToolCallPhase
    status: _message_pb2.ToolResultStatus
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., phase: _Optional[_Union[ToolCallPhase, str]] = ..., status: _Optional[_Union[_message_pb2.ToolResultStatus, str]] = ...) -> None: ...

class ToolCallPhase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ErrorBucket(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SuspensionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
