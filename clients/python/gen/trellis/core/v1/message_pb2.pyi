from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
IMAGE_DETAIL_AUTO: ImageDetail
IMAGE_DETAIL_HIGH: ImageDetail
IMAGE_DETAIL_LOW: ImageDetail
IMAGE_DETAIL_UNSPECIFIED: ImageDetail
ROLE_AGENT: Role
ROLE_ASSISTANT: Role
ROLE_SYSTEM: Role
ROLE_TOOL: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role
TOOL_RESULT_STATUS_DENIED: ToolResultStatus
TOOL_RESULT_STATUS_ERROR: ToolResultStatus
TOOL_RESULT_STATUS_INTERRUPTED: ToolResultStatus
TOOL_RESULT_STATUS_OK: ToolResultStatus
TOOL_RESULT_STATUS_TIMEOUT: ToolResultStatus
TOOL_RESULT_STATUS_UNSPECIFIED: ToolResultStatus
VISIBILITY_INTERNAL: Visibility
VISIBILITY_PUBLIC: Visibility
VISIBILITY_RECEIPT_ONLY: Visibility
VISIBILITY_UNSPECIFIED: Visibility

class ArtifactRefPart(_message.Message):
    __slots__ = ["artifact_id"]
    ARTIFACT_ID_FIELD_NUMBER: _ClassVar[int]
    artifact_id: str
    def __init__(self, artifact_id: _Optional[str] = ...) -> None: ...

class FileRefPart(_message.Message):
    __slots__ = ["mime_type", "uri"]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    mime_type: str
    uri: str
    def __init__(self, uri: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class ImagePart(_message.Message):
    __slots__ = ["base64_data", "detail", "media_type", "url"]
    BASE64_DATA_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    MEDIA_TYPE_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    base64_data: str
    detail: ImageDetail
    media_type: str
    url: str
    def __init__(self, url: _Optional[str] = ..., base64_data: _Optional[str] = ..., media_type: _Optional[str] = ..., detail: _Optional[_Union[ImageDetail, str]] = ...) -> None: ...

class ImageRefPart(_message.Message):
    __slots__ = ["artifact_id", "mime_type"]
    ARTIFACT_ID_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    artifact_id: str
    mime_type: str
    def __init__(self, artifact_id: _Optional[str] = ..., mime_type: _Optional[str] = ...) -> None: ...

class JsonPart(_message.Message):
    __slots__ = ["value"]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    value: _struct_pb2.Value
    def __init__(self, value: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["created_at", "id", "metadata", "name", "parts", "role", "tool_call_id", "tool_calls"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    id: str
    metadata: _struct_pb2.Struct
    name: str
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    role: Role
    tool_call_id: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    def __init__(self, id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ["artifact_ref", "file_ref", "image", "image_ref", "json", "redacted_thinking", "text", "thinking", "tool_call", "tool_result", "visibility"]
    ARTIFACT_REF_FIELD_NUMBER: _ClassVar[int]
    FILE_REF_FIELD_NUMBER: _ClassVar[int]
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_REF_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    REDACTED_THINKING_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    THINKING_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    VISIBILITY_FIELD_NUMBER: _ClassVar[int]
    artifact_ref: ArtifactRefPart
    file_ref: FileRefPart
    image: ImagePart
    image_ref: ImageRefPart
    json: JsonPart
    redacted_thinking: RedactedThinkingPart
    text: TextPart
    thinking: ThinkingPart
    tool_call: ToolCallPart
    tool_result: ToolResultPart
    visibility: Visibility
    def __init__(self, visibility: _Optional[_Union[Visibility, str]] = ..., text: _Optional[_Union[TextPart, _Mapping]] = ..., image: _Optional[_Union[ImagePart, _Mapping]] = ..., thinking: _Optional[_Union[ThinkingPart, _Mapping]] = ..., redacted_thinking: _Optional[_Union[RedactedThinkingPart, _Mapping]] = ..., json: _Optional[_Union[JsonPart, _Mapping]] = ..., tool_call: _Optional[_Union[ToolCallPart, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResultPart, _Mapping]] = ..., artifact_ref: _Optional[_Union[ArtifactRefPart, _Mapping]] = ..., file_ref: _Optional[_Union[FileRefPart, _Mapping]] = ..., image_ref: _Optional[_Union[ImageRefPart, _Mapping]] = ...) -> None: ...

class RedactedThinkingPart(_message.Message):
    __slots__ = ["data"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: str
    def __init__(self, data: _Optional[str] = ...) -> None: ...

class TextPart(_message.Message):
    __slots__ = ["signature", "text"]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    signature: str
    text: str
    def __init__(self, text: _Optional[str] = ..., signature: _Optional[str] = ...) -> None: ...

class ThinkingPart(_message.Message):
    __slots__ = ["signature", "text"]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    signature: str
    text: str
    def __init__(self, text: _Optional[str] = ..., signature: _Optional[str] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ["arguments", "id", "name", "signature"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    arguments: _struct_pb2.Value
    id: str
    name: str
    signature: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., signature: _Optional[str] = ...) -> None: ...

class ToolCallPart(_message.Message):
    __slots__ = ["input", "name", "tool_call_id"]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    input: _struct_pb2.Value
    name: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., input: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class ToolResultPart(_message.Message):
    __slots__ = ["output", "status", "tool_call_id"]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    output: _struct_pb2.Value
    status: ToolResultStatus
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., output: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ..., status: _Optional[_Union[ToolResultStatus, str]] = ...) -> None: ...

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Visibility(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ImageDetail(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolResultStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
