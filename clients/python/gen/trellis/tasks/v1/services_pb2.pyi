from google.protobuf import struct_pb2 as _struct_pb2
from trellis.adapters.v1 import execution_pb2 as _execution_pb2
from trellis.core.v1 import event_pb2 as _event_pb2
from trellis.core.v1 import message_pb2 as _message_pb2
from trellis.tasks.v1 import resources_pb2 as _resources_pb2
from trellis.tasks.v1 import workspace_updates_pb2 as _workspace_updates_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
REPLAY_MODE_EXACT: ReplayMode
REPLAY_MODE_FROM_CHECKPOINT: ReplayMode
REPLAY_MODE_UNSPECIFIED: ReplayMode
REPLAY_MODE_WITH_OVERRIDES: ReplayMode

class AppendMessageRequest(_message.Message):
    __slots__ = ["idempotency_key", "message", "session_id"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    message: _message_pb2.Message
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class AppendMessageResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: _resources_pb2.SessionMessage
    def __init__(self, message: _Optional[_Union[_resources_pb2.SessionMessage, _Mapping]] = ...) -> None: ...

class CancelTaskRequest(_message.Message):
    __slots__ = ["reason", "task_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _resources_pb2.Task
    def __init__(self, task: _Optional[_Union[_resources_pb2.Task, _Mapping]] = ...) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["reason", "session_id"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    reason: str
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _resources_pb2.Session
    def __init__(self, session: _Optional[_Union[_resources_pb2.Session, _Mapping]] = ...) -> None: ...

class CreateAgentRequest(_message.Message):
    __slots__ = ["agent", "idempotency_key"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    agent: _resources_pb2.Agent
    idempotency_key: str
    def __init__(self, agent: _Optional[_Union[_resources_pb2.Agent, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CreateAgentResponse(_message.Message):
    __slots__ = ["agent"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: _resources_pb2.Agent
    def __init__(self, agent: _Optional[_Union[_resources_pb2.Agent, _Mapping]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ["agent_id", "idempotency_key", "initial_messages", "metadata", "session_id", "workspace_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INITIAL_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    idempotency_key: str
    initial_messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    metadata: _struct_pb2.Struct
    session_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., initial_messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class CreateSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _resources_pb2.Session
    def __init__(self, session: _Optional[_Union[_resources_pb2.Session, _Mapping]] = ...) -> None: ...

class CreateWorkspaceRequest(_message.Message):
    __slots__ = ["idempotency_key", "metadata", "name", "root", "workspace_id"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROOT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    metadata: _struct_pb2.Struct
    name: str
    root: str
    workspace_id: str
    def __init__(self, name: _Optional[str] = ..., root: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class CreateWorkspaceResponse(_message.Message):
    __slots__ = ["workspace"]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: _resources_pb2.Workspace
    def __init__(self, workspace: _Optional[_Union[_resources_pb2.Workspace, _Mapping]] = ...) -> None: ...

class DeliverRequest(_message.Message):
    __slots__ = ["delivery_id", "payload", "session_id", "signal_id"]
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    delivery_id: str
    payload: _struct_pb2.Value
    session_id: str
    signal_id: str
    def __init__(self, signal_id: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., delivery_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class DeliverResponse(_message.Message):
    __slots__ = ["duplicate", "task", "task_id"]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    duplicate: bool
    task: _resources_pb2.Task
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., duplicate: bool = ..., task: _Optional[_Union[_resources_pb2.Task, _Mapping]] = ...) -> None: ...

class ForkSessionRequest(_message.Message):
    __slots__ = ["at_cursor", "at_event_id", "at_message_count", "at_message_id", "branch_id", "idempotency_key", "metadata", "session_id"]
    AT_CURSOR_FIELD_NUMBER: _ClassVar[int]
    AT_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    AT_MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    AT_MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    BRANCH_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    at_cursor: str
    at_event_id: str
    at_message_count: int
    at_message_id: str
    branch_id: str
    idempotency_key: str
    metadata: _struct_pb2.Struct
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., at_event_id: _Optional[str] = ..., at_message_count: _Optional[int] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., branch_id: _Optional[str] = ..., at_message_id: _Optional[str] = ..., at_cursor: _Optional[str] = ...) -> None: ...

class ForkSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _resources_pb2.Session
    def __init__(self, session: _Optional[_Union[_resources_pb2.Session, _Mapping]] = ...) -> None: ...

class GetAgentRequest(_message.Message):
    __slots__ = ["agent_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    def __init__(self, agent_id: _Optional[str] = ...) -> None: ...

class GetAgentResponse(_message.Message):
    __slots__ = ["agent"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    agent: _resources_pb2.Agent
    def __init__(self, agent: _Optional[_Union[_resources_pb2.Agent, _Mapping]] = ...) -> None: ...

class GetArtifactContentRequest(_message.Message):
    __slots__ = ["artifact_id"]
    ARTIFACT_ID_FIELD_NUMBER: _ClassVar[int]
    artifact_id: str
    def __init__(self, artifact_id: _Optional[str] = ...) -> None: ...

class GetArtifactContentResponse(_message.Message):
    __slots__ = ["content", "mime_type"]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    content: bytes
    mime_type: str
    def __init__(self, content: _Optional[bytes] = ..., mime_type: _Optional[str] = ...) -> None: ...

class GetArtifactRequest(_message.Message):
    __slots__ = ["artifact_id"]
    ARTIFACT_ID_FIELD_NUMBER: _ClassVar[int]
    artifact_id: str
    def __init__(self, artifact_id: _Optional[str] = ...) -> None: ...

class GetArtifactResponse(_message.Message):
    __slots__ = ["artifact"]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    artifact: _resources_pb2.Artifact
    def __init__(self, artifact: _Optional[_Union[_resources_pb2.Artifact, _Mapping]] = ...) -> None: ...

class GetEventRequest(_message.Message):
    __slots__ = ["event_id"]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    event_id: str
    def __init__(self, event_id: _Optional[str] = ...) -> None: ...

class GetEventResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: _event_pb2.Event
    def __init__(self, event: _Optional[_Union[_event_pb2.Event, _Mapping]] = ...) -> None: ...

class GetMessageRequest(_message.Message):
    __slots__ = ["message_id"]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    message_id: str
    def __init__(self, message_id: _Optional[str] = ...) -> None: ...

class GetMessageResponse(_message.Message):
    __slots__ = ["message"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    message: _resources_pb2.SessionMessage
    def __init__(self, message: _Optional[_Union[_resources_pb2.SessionMessage, _Mapping]] = ...) -> None: ...

class GetOutcomeRequest(_message.Message):
    __slots__ = ["outcome_id"]
    OUTCOME_ID_FIELD_NUMBER: _ClassVar[int]
    outcome_id: str
    def __init__(self, outcome_id: _Optional[str] = ...) -> None: ...

class GetOutcomeResponse(_message.Message):
    __slots__ = ["outcome"]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    outcome: _resources_pb2.Outcome
    def __init__(self, outcome: _Optional[_Union[_resources_pb2.Outcome, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ["session_id", "workspace_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    workspace_id: str
    def __init__(self, session_id: _Optional[str] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class GetSessionResponse(_message.Message):
    __slots__ = ["session"]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    session: _resources_pb2.Session
    def __init__(self, session: _Optional[_Union[_resources_pb2.Session, _Mapping]] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ["task_id"]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    def __init__(self, task_id: _Optional[str] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _resources_pb2.Task
    def __init__(self, task: _Optional[_Union[_resources_pb2.Task, _Mapping]] = ...) -> None: ...

class GetWorkspaceRequest(_message.Message):
    __slots__ = ["workspace_id"]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class GetWorkspaceResponse(_message.Message):
    __slots__ = ["workspace"]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: _resources_pb2.Workspace
    def __init__(self, workspace: _Optional[_Union[_resources_pb2.Workspace, _Mapping]] = ...) -> None: ...

class ListAgentsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListAgentsResponse(_message.Message):
    __slots__ = ["agents", "next_page_token"]
    AGENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    agents: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Agent]
    next_page_token: str
    def __init__(self, agents: _Optional[_Iterable[_Union[_resources_pb2.Agent, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListArtifactsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id", "task_id", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    task_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListArtifactsResponse(_message.Message):
    __slots__ = ["artifacts", "next_page_token"]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    artifacts: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Artifact]
    next_page_token: str
    def __init__(self, artifacts: _Optional[_Iterable[_Union[_resources_pb2.Artifact, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ["after_event_id", "limit", "session_id", "task_id", "workspace_id"]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    after_event_id: str
    limit: int
    session_id: str
    task_id: str
    workspace_id: str
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., after_event_id: _Optional[str] = ..., limit: _Optional[int] = ..., workspace_id: _Optional[str] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ["events", "has_more"]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    HAS_MORE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_event_pb2.Event]
    has_more: bool
    def __init__(self, events: _Optional[_Iterable[_Union[_event_pb2.Event, _Mapping]]] = ..., has_more: bool = ...) -> None: ...

class ListMessagesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id", "task_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    task_id: str
    def __init__(self, session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., task_id: _Optional[str] = ...) -> None: ...

class ListMessagesResponse(_message.Message):
    __slots__ = ["messages", "next_page_token"]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    messages: _containers.RepeatedCompositeFieldContainer[_resources_pb2.SessionMessage]
    next_page_token: str
    def __init__(self, messages: _Optional[_Iterable[_Union[_resources_pb2.SessionMessage, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListOutcomesRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "session_id", "task_id", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    session_id: str
    task_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListOutcomesResponse(_message.Message):
    __slots__ = ["next_page_token", "outcomes"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    OUTCOMES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    outcomes: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Outcome]
    def __init__(self, outcomes: _Optional[_Iterable[_Union[_resources_pb2.Outcome, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ["next_page_token", "sessions"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    sessions: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Session]
    def __init__(self, sessions: _Optional[_Iterable[_Union[_resources_pb2.Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "parent_task_id", "session_id", "statuses", "waiting_signal_id", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PARENT_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATUSES_FIELD_NUMBER: _ClassVar[int]
    WAITING_SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    parent_task_id: str
    session_id: str
    statuses: _containers.RepeatedScalarFieldContainer[_event_pb2.TaskStatus]
    waiting_signal_id: str
    workspace_id: str
    def __init__(self, session_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., statuses: _Optional[_Iterable[_Union[_event_pb2.TaskStatus, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., parent_task_id: _Optional[str] = ..., waiting_signal_id: _Optional[str] = ...) -> None: ...

class ListTasksResponse(_message.Message):
    __slots__ = ["next_page_token", "tasks"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    tasks: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Task]
    def __init__(self, tasks: _Optional[_Iterable[_Union[_resources_pb2.Task, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListWorkspacesRequest(_message.Message):
    __slots__ = ["page_size", "page_token"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkspacesResponse(_message.Message):
    __slots__ = ["next_page_token", "workspaces"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKSPACES_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    workspaces: _containers.RepeatedCompositeFieldContainer[_resources_pb2.Workspace]
    def __init__(self, workspaces: _Optional[_Iterable[_Union[_resources_pb2.Workspace, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RegisterArtifactRequest(_message.Message):
    __slots__ = ["artifact", "content", "idempotency_key"]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    artifact: _resources_pb2.Artifact
    content: bytes
    idempotency_key: str
    def __init__(self, artifact: _Optional[_Union[_resources_pb2.Artifact, _Mapping]] = ..., content: _Optional[bytes] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RegisterArtifactResponse(_message.Message):
    __slots__ = ["artifact"]
    ARTIFACT_FIELD_NUMBER: _ClassVar[int]
    artifact: _resources_pb2.Artifact
    def __init__(self, artifact: _Optional[_Union[_resources_pb2.Artifact, _Mapping]] = ...) -> None: ...

class ReplayOverride(_message.Message):
    __slots__ = ["artifact_id", "event_id", "kind", "reason", "sha256", "target", "value", "visibility"]
    ARTIFACT_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    artifact_id: str
    event_id: str
    kind: str
    reason: str
    sha256: str
    target: str
    value: _struct_pb2.Value
    visibility: _message_pb2.Visibility
    def __init__(self, kind: _Optional[str] = ..., event_id: _Optional[str] = ..., target: _Optional[str] = ..., value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., artifact_id: _Optional[str] = ..., sha256: _Optional[str] = ..., visibility: _Optional[_Union[_message_pb2.Visibility, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ReplayTaskRequest(_message.Message):
    __slots__ = ["checkpoint_event_id", "checkpoint_id", "idempotency_key", "metadata", "mode", "overrides", "reason", "refresh_memory", "task_id"]
    class OverridesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ReplayOverride
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ReplayOverride, _Mapping]] = ...) -> None: ...
    CHECKPOINT_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    CHECKPOINT_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    OVERRIDES_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REFRESH_MEMORY_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    checkpoint_event_id: str
    checkpoint_id: str
    idempotency_key: str
    metadata: _struct_pb2.Struct
    mode: ReplayMode
    overrides: _containers.MessageMap[str, ReplayOverride]
    reason: str
    refresh_memory: bool
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., mode: _Optional[_Union[ReplayMode, str]] = ..., overrides: _Optional[_Mapping[str, ReplayOverride]] = ..., checkpoint_id: _Optional[str] = ..., checkpoint_event_id: _Optional[str] = ..., reason: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., refresh_memory: bool = ...) -> None: ...

class ReplayTaskResponse(_message.Message):
    __slots__ = ["replayed", "session", "task"]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    replayed: bool
    session: _resources_pb2.Session
    task: _resources_pb2.Task
    def __init__(self, task: _Optional[_Union[_resources_pb2.Task, _Mapping]] = ..., session: _Optional[_Union[_resources_pb2.Session, _Mapping]] = ..., replayed: bool = ...) -> None: ...

class StreamEventsRequest(_message.Message):
    __slots__ = ["after_event_id", "from_now", "session_id", "task_id", "workspace_id"]
    AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_NOW_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    after_event_id: str
    from_now: bool
    session_id: str
    task_id: str
    workspace_id: str
    def __init__(self, session_id: _Optional[str] = ..., task_id: _Optional[str] = ..., after_event_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., from_now: bool = ...) -> None: ...

class StreamEventsResponse(_message.Message):
    __slots__ = ["event", "start_after_event_id"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    START_AFTER_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    event: _event_pb2.Event
    start_after_event_id: str
    def __init__(self, event: _Optional[_Union[_event_pb2.Event, _Mapping]] = ..., start_after_event_id: _Optional[str] = ...) -> None: ...

class SubmitTaskRequest(_message.Message):
    __slots__ = ["agent_id", "busy_policy", "create_session", "idempotency_key", "input", "metadata", "parent_task_id", "requirements", "session_id", "wait_ms", "workspace_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    BUSY_POLICY_FIELD_NUMBER: _ClassVar[int]
    CREATE_SESSION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PARENT_TASK_ID_FIELD_NUMBER: _ClassVar[int]
    REQUIREMENTS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    busy_policy: _resources_pb2.BusyPolicy
    create_session: bool
    idempotency_key: str
    input: _message_pb2.Message
    metadata: _struct_pb2.Struct
    parent_task_id: str
    requirements: _execution_pb2.ExecutionRequirements
    session_id: str
    wait_ms: int
    workspace_id: str
    def __init__(self, session_id: _Optional[str] = ..., agent_id: _Optional[str] = ..., input: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., busy_policy: _Optional[_Union[_resources_pb2.BusyPolicy, str]] = ..., idempotency_key: _Optional[str] = ..., parent_task_id: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., create_session: bool = ..., workspace_id: _Optional[str] = ..., wait_ms: _Optional[int] = ..., requirements: _Optional[_Union[_execution_pb2.ExecutionRequirements, _Mapping]] = ...) -> None: ...

class SubmitTaskResponse(_message.Message):
    __slots__ = ["replayed", "task"]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    replayed: bool
    task: _resources_pb2.Task
    def __init__(self, task: _Optional[_Union[_resources_pb2.Task, _Mapping]] = ..., replayed: bool = ...) -> None: ...

class TruncateSessionRequest(_message.Message):
    __slots__ = ["idempotency_key", "keep_turns", "session_id"]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    KEEP_TURNS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    idempotency_key: str
    keep_turns: int
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., keep_turns: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TruncateSessionResponse(_message.Message):
    __slots__ = ["dropped_messages", "session"]
    DROPPED_MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    dropped_messages: int
    session: _resources_pb2.Session
    def __init__(self, session: _Optional[_Union[_resources_pb2.Session, _Mapping]] = ..., dropped_messages: _Optional[int] = ...) -> None: ...

class WatchTaskRequest(_message.Message):
    __slots__ = ["task_id", "until_settled"]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    UNTIL_SETTLED_FIELD_NUMBER: _ClassVar[int]
    task_id: str
    until_settled: bool
    def __init__(self, task_id: _Optional[str] = ..., until_settled: bool = ...) -> None: ...

class WatchTaskResponse(_message.Message):
    __slots__ = ["task"]
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _resources_pb2.Task
    def __init__(self, task: _Optional[_Union[_resources_pb2.Task, _Mapping]] = ...) -> None: ...

class ReplayMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
