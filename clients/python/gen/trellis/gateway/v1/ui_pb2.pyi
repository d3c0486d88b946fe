from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
UI_TIER_DEBUG: UiTier
UI_TIER_DEFAULT: UiTier
UI_TIER_UNSPECIFIED: UiTier

class StreamUiEventsRequest(_message.Message):
    __slots__ = ["cursor", "session_id", "tier", "until_event_id"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TIER_FIELD_NUMBER: _ClassVar[int]
    UNTIL_EVENT_ID_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    session_id: str
    tier: UiTier
    until_event_id: str
    def __init__(self, session_id: _Optional[str] = ..., tier: _Optional[_Union[UiTier, str]] = ..., cursor: _Optional[str] = ..., until_event_id: _Optional[str] = ...) -> None: ...

class StreamUiEventsResponse(_message.Message):
    __slots__ = ["envelope"]
    ENVELOPE_FIELD_NUMBER: _ClassVar[int]
    envelope: UiEnvelope
    def __init__(self, envelope: _Optional[_Union[UiEnvelope, _Mapping]] = ...) -> None: ...

class UiEnvelope(_message.Message):
    __slots__ = ["cursor", "payload", "type"]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    cursor: str
    payload: _struct_pb2.Struct
    type: str
    def __init__(self, cursor: _Optional[str] = ..., type: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UiTier(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
