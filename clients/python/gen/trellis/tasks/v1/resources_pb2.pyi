from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trellis.core.v1 import error_pb2 as _error_pb2
from trellis.core.v1 import event_pb2 as _event_pb2
from trellis.core.v1 import message_pb2 as _message_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

ARTIFACT_KIND_DATASET: ArtifactKind
ARTIFACT_KIND_DIFF: ArtifactKind
ARTIFACT_KIND_FILE: ArtifactKind
ARTIFACT_KIND_IMAGE: ArtifactKind
ARTIFACT_KIND_LOG: ArtifactKind
ARTIFACT_KIND_OTHER: ArtifactKind
ARTIFACT_KIND_PATCH: ArtifactKind
ARTIFACT_KIND_RECEIPT: ArtifactKind
ARTIFACT_KIND_SNAPSHOT: ArtifactKind
ARTIFACT_KIND_UNSPECIFIED: ArtifactKind
AUTONOMY_TIER_ACT_AUTO: AutonomyTier
AUTONOMY_TIER_ACT_WITH_APPROVAL: AutonomyTier
AUTONOMY_TIER_SHADOW: AutonomyTier
AUTONOMY_TIER_SUGGEST: AutonomyTier
AUTONOMY_TIER_UNSPECIFIED: AutonomyTier
BUSY_POLICY_ENQUEUE: BusyPolicy
BUSY_POLICY_INTERRUPT: BusyPolicy
BUSY_POLICY_REJECT: BusyPolicy
BUSY_POLICY_UNSPECIFIED: BusyPolicy
DESCRIPTOR: _descriptor.FileDescriptor
OUTCOME_STATUS_CANCELED: OutcomeStatus
OUTCOME_STATUS_FAILED: OutcomeStatus
OUTCOME_STATUS_SUCCEEDED: OutcomeStatus
OUTCOME_STATUS_UNSPECIFIED: OutcomeStatus
RECEIPT_POLICY_DISABLED: ReceiptPolicy
RECEIPT_POLICY_OPTIONAL: ReceiptPolicy
RECEIPT_POLICY_REQUIRED: ReceiptPolicy
RECEIPT_POLICY_UNSPECIFIED: ReceiptPolicy

class Agent(_message.Message):
    __slots__ = ["autonomy_tier", "backend", "created_at", "definition", "description", "id", "metadata", "name", "receipt_policy", "safe_to_retry", "tools", "updated_at", "version", "workspace_id"]
    AUTONOMY_TIER_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DEFINITION_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_POLICY_FIELD_NUMBER: _ClassVar[int]
    SAFE_TO_RETRY_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    autonomy_tier: AutonomyTier
    backend: str
    created_at: _timestamp_pb2.Timestamp
    definition: _struct_pb2.Struct
    description: str
    id: str
    metadata: _struct_pb2.Struct
    name: str
    receipt_policy: ReceiptPolicy
    safe_to_retry: bool
    tools: _containers.RepeatedScalarFieldContainer[str]
    updated_at: _timestamp_pb2.Timestamp
    version: str
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., name: _Optional[str] = ..., version: _Optional[str] = ..., description: _Optional[str] = ..., backend: _Optional[str] = ..., tools: _Optional[_Iterable[str]] = ..., autonomy_tier: _Optional[_Union[AutonomyTier, str]] = ..., receipt_policy: _Optional[_Union[ReceiptPolicy, str]] = ..., definition: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., safe_to_retry: bool = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Artifact(_message.Message):
    __slots__ = ["created_at", "id", "kind", "metadata", "mime_type", "name", "session_id", "sha256", "size_bytes", "task_id", "uri", "visibility", "workspace_id"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    id: str
    kind: ArtifactKind
    metadata: _struct_pb2.Struct
    mime_type: str
    name: str
    session_id: str
    sha256: str
    size_bytes: int
    task_id: str
    uri: str
    visibility: _message_pb2.Visibility
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., kind: _Optional[_Union[ArtifactKind, str]] = ..., name: _Optional[str] = ..., mime_type: _Optional[str] = ..., uri: _Optional[str] = ..., visibility: _Optional[_Union[_message_pb2.Visibility, str]] = ..., sha256: _Optional[str] = ..., size_bytes: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class Outcome(_message.Message):
    __slots__ = ["artifact_ids", "created_at", "id", "messages", "session_id", "status", "summary", "task_id", "workspace_id"]
    ARTIFACT_IDS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    artifact_ids: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    id: str
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    session_id: str
    status: OutcomeStatus
    summary: str
    task_id: str
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., task_id: _Optional[str] = ..., session_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., status: _Optional[_Union[OutcomeStatus, str]] = ..., summary: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., artifact_ids: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Session(_message.Message):
    __slots__ = ["agent_id", "branch_id", "created_at", "forked_from_event_id", "forked_from_message_id", "forked_message_count", "id", "last_event_id", "message_count", "metadata", "parent_session_id", "root_session_id", "state", "summary", "turn_count", "updated_at", "workspace_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    BRANCH_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    FORKED_FROM_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    FORKED_MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LAST_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PARENT_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ROOT_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SUMMARY_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    branch_id: str
    created_at: _timestamp_pb2.Timestamp
    forked_from_event_id: str
    forked_from_message_id: str
    forked_message_count: int
    id: str
    last_event_id: str
    message_count: int
    metadata: _struct_pb2.Struct
    parent_session_id: str
    root_session_id: str
    state: _event_pb2.SessionState
    summary: str
    turn_count: int
    updated_at: _timestamp_pb2.Timestamp
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., state: _Optional[_Union[_event_pb2.SessionState, str]] = ..., agent_id: _Optional[str] = ..., root_session_id: _Optional[str] = ..., parent_session_id: _Optional[str] = ..., branch_id: _Optional[str] = ..., last_event_id: _Optional[str] = ..., summary: _Optional[str] = ..., message_count: _Optional[int] = ..., turn_count: _Optional[int] = ..., forked_from_event_id: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., forked_from_message_id: _Optional[str] = ..., forked_message_count: _Optional[int] = ...) -> None: ...

class SessionMessage(_message.Message):
    __slots__ = ["message", "position", "session_id", "task_id", "turn"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    message: _message_pb2.Message
    position: int
    session_id: str
    task_id: str
    turn: int
    def __init__(self, message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., session_id: _Optional[str] = ..., position: _Optional[int] = ..., turn: _Optional[int] = ..., task_id: _Optional[str] = ...) -> None: ...

class Suspension(_message.Message):
    __slots__ = ["checkpoint_id", "metadata", "pending_messages", "signal_id"]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PENDING_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    checkpoint_id: str
    metadata: _struct_pb2.Struct
    pending_messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    signal_id: str
    def __init__(self, signal_id: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., pending_messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., checkpoint_id: _Optional[str] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ["agent_id", "assigned_backend", "branch_id", "busy_policy", "canceled_at", "completed_at", "created_at", "created_by", "failure", "id", "input", "metadata", "outcome_id", "output", "parent_task_id", "receipt_id", "session_id", "started_at", "state", "status", "suspension", "updated_at", "workspace_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_BACKEND_FIELD_NUMBER: _ClassVar[int]
    BRANCH_ID_FIELD_NUMBER: _ClassVar[int]
    BUSY_POLICY_FIELD_NUMBER: _ClassVar[int]
    CANCELED_AT_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PARENT_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STARTED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SUSPENSION_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    assigned_backend: str
    branch_id: str
    busy_policy: BusyPolicy
    canceled_at: _timestamp_pb2.Timestamp
    completed_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    created_by: str
    failure: TaskFailure
    id: str
    input: _message_pb2.Message
    metadata: _struct_pb2.Struct
    outcome_id: str
    output: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    parent_task_id: str
    receipt_id: str
    session_id: str
    started_at: _timestamp_pb2.Timestamp
    state: _struct_pb2.Struct
    status: _event_pb2.TaskStatus
    suspension: Suspension
    updated_at: _timestamp_pb2.Timestamp
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., session_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., status: _Optional[_Union[_event_pb2.TaskStatus, str]] = ..., input: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., created_by: _Optional[str] = ..., agent_id: _Optional[str] = ..., branch_id: _Optional[str] = ..., parent_task_id: _Optional[str] = ..., assigned_backend: _Optional[str] = ..., receipt_id: _Optional[str] = ..., outcome_id: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., started_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., completed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., canceled_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., failure: _Optional[_Union[TaskFailure, _Mapping]] = ..., suspension: _Optional[_Union[Suspension, _Mapping]] = ..., output: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., busy_policy: _Optional[_Union[BusyPolicy, str]] = ..., state: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class TaskFailure(_message.Message):
    __slots__ = ["blocking", "category", "detail", "message", "retryable"]
    BLOCKING_FIELD_NUMBER: _ClassVar[int]
    CATEGORY_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RETRYABLE_FIELD_NUMBER: _ClassVar[int]
    blocking: _error_pb2.BlockingReasons
    category: str
    detail: _error_pb2.ErrorDetail
    message: str
    retryable: bool
    def __init__(self, category: _Optional[str] = ..., message: _Optional[str] = ..., retryable: bool = ..., detail: _Optional[_Union[_error_pb2.ErrorDetail, _Mapping]] = ..., blocking: _Optional[_Union[_error_pb2.BlockingReasons, _Mapping]] = ...) -> None: ...

class Workspace(_message.Message):
    __slots__ = ["archived_at", "created_at", "default_branch_id", "id", "metadata", "name", "root", "updated_at"]
    ARCHIVED_AT_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_BRANCH_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    archived_at: _timestamp_pb2.Timestamp
    created_at: _timestamp_pb2.Timestamp
    default_branch_id: str
    id: str
    metadata: _struct_pb2.Struct
    name: str
    root: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., root: _Optional[str] = ..., default_branch_id: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., archived_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class AutonomyTier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ReceiptPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class BusyPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class OutcomeStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ArtifactKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
