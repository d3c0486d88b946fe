from trellis.core.v1 import message_pb2 as _message_pb2
from trellis.tasks.v1 import resources_pb2 as _resources_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FinishedStep(_message.Message):
    __slots__ = ["assigned_backend", "outcome", "output", "signal_id", "status"]
    ASSIGNED_BACKEND_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SIGNAL_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    assigned_backend: str
    outcome: _resources_pb2.Outcome
    output: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    signal_id: str
    status: int
    def __init__(self, status: _Optional[int] = ..., output: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., outcome: _Optional[_Union[_resources_pb2.Outcome, _Mapping]] = ..., assigned_backend: _Optional[str] = ..., signal_id: _Optional[str] = ...) -> None: ...

class SessionCounters(_message.Message):
    __slots__ = ["message_count", "next_queue_seq", "transcript_epoch", "turn_count"]
    MESSAGE_COUNT_FIELD_NUMBER: _ClassVar[int]
    NEXT_QUEUE_SEQ_FIELD_NUMBER: _ClassVar[int]
    TRANSCRIPT_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TURN_COUNT_FIELD_NUMBER: _ClassVar[int]
    message_count: int
    next_queue_seq: int
    transcript_epoch: int
    turn_count: int
    def __init__(self, message_count: _Optional[int] = ..., turn_count: _Optional[int] = ..., transcript_epoch: _Optional[int] = ..., next_queue_seq: _Optional[int] = ...) -> None: ...

class StepRecord(_message.Message):
    __slots__ = ["counters", "finished", "session_id", "submitted", "task_id", "workspace_id"]
    COUNTERS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBMITTED_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    counters: SessionCounters
    finished: FinishedStep
    session_id: str
    submitted: SubmittedStep
    task_id: str
    workspace_id: str
    def __init__(self, session_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., task_id: _Optional[str] = ..., counters: _Optional[_Union[SessionCounters, _Mapping]] = ..., submitted: _Optional[_Union[SubmittedStep, _Mapping]] = ..., finished: _Optional[_Union[FinishedStep, _Mapping]] = ...) -> None: ...

class SubmittedStep(_message.Message):
    __slots__ = ["created_by", "idempotency_key", "input", "input_position", "queue_seq", "run_now", "task"]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    INPUT_POSITION_FIELD_NUMBER: _ClassVar[int]
    QUEUE_SEQ_FIELD_NUMBER: _ClassVar[int]
    RUN_NOW_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    created_by: str
    idempotency_key: str
    input: _message_pb2.Message
    input_position: int
    queue_seq: int
    run_now: bool
    task: _resources_pb2.Task
    def __init__(self, task: _Optional[_Union[_resources_pb2.Task, _Mapping]] = ..., input: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., queue_seq: _Optional[int] = ..., run_now: bool = ..., input_position: _Optional[int] = ..., created_by: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...
