from google.protobuf import struct_pb2 as _struct_pb2
from trellis.tasks.v1 import resources_pb2 as _resources_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ArchiveWorkspaceRequest(_message.Message):
    __slots__ = ["workspace_id"]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class ArchiveWorkspaceResponse(_message.Message):
    __slots__ = ["workspace"]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: _resources_pb2.Workspace
    def __init__(self, workspace: _Optional[_Union[_resources_pb2.Workspace, _Mapping]] = ...) -> None: ...

class UpdateWorkspaceRequest(_message.Message):
    __slots__ = ["metadata", "name", "workspace_id"]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _struct_pb2.Struct
    name: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., name: _Optional[str] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class UpdateWorkspaceResponse(_message.Message):
    __slots__ = ["workspace"]
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: _resources_pb2.Workspace
    def __init__(self, workspace: _Optional[_Union[_resources_pb2.Workspace, _Mapping]] = ...) -> None: ...
