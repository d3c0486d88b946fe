from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

CONNECTOR_DELIVERY_MODE_MESSAGE: ConnectorDeliveryMode
CONNECTOR_DELIVERY_MODE_TASK: ConnectorDeliveryMode
CONNECTOR_DELIVERY_MODE_UNSPECIFIED: ConnectorDeliveryMode
CONNECTOR_STATUS_ACTIVE: ConnectorStatus
CONNECTOR_STATUS_DISABLED: ConnectorStatus
CONNECTOR_STATUS_FAILED: ConnectorStatus
CONNECTOR_STATUS_PAUSED: ConnectorStatus
CONNECTOR_STATUS_UNSPECIFIED: ConnectorStatus
DESCRIPTOR: _descriptor.FileDescriptor

class Connector(_message.Message):
    __slots__ = ["created_at", "delivery_mode", "event_kinds", "id", "metadata", "provider", "status", "status_reason", "target_persona_id", "target_session_id", "updated_at", "workspace_id"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_MODE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KINDS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    STATUS_REASON_FIELD_NUMBER: _ClassVar[int]
    TARGET_PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    delivery_mode: ConnectorDeliveryMode
    event_kinds: _containers.RepeatedScalarFieldContainer[str]
    id: str
    metadata: _struct_pb2.Struct
    provider: str
    status: ConnectorStatus
    status_reason: str
    target_persona_id: str
    target_session_id: str
    updated_at: _timestamp_pb2.Timestamp
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., provider: _Optional[str] = ..., status: _Optional[_Union[ConnectorStatus, str]] = ..., event_kinds: _Optional[_Iterable[str]] = ..., delivery_mode: _Optional[_Union[ConnectorDeliveryMode, str]] = ..., target_persona_id: _Optional[str] = ..., target_session_id: _Optional[str] = ..., status_reason: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class ConnectorDelivery(_message.Message):
    __slots__ = ["connector_id", "created_at", "delivery_id", "event_kind", "failure", "id", "message_id", "session_id", "state", "task_id", "workspace_id"]
    CONNECTOR_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_KIND_FIELD_NUMBER: _ClassVar[int]
    FAILURE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    connector_id: str
    created_at: _timestamp_pb2.Timestamp
    delivery_id: str
    event_kind: str
    failure: str
    id: str
    message_id: str
    session_id: str
    state: str
    task_id: str
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., connector_id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., delivery_id: _Optional[str] = ..., event_kind: _Optional[str] = ..., state: _Optional[str] = ..., task_id: _Optional[str] = ..., session_id: _Optional[str] = ..., message_id: _Optional[str] = ..., failure: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateConnectorRequest(_message.Message):
    __slots__ = ["delivery_mode", "event_kinds", "idempotency_key", "metadata", "provider", "status", "target_persona_id", "target_session_id", "workspace_id"]
    DELIVERY_MODE_FIELD_NUMBER: _ClassVar[int]
    EVENT_KINDS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TARGET_PERSONA_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    delivery_mode: ConnectorDeliveryMode
    event_kinds: _containers.RepeatedScalarFieldContainer[str]
    idempotency_key: str
    metadata: _struct_pb2.Struct
    provider: str
    status: ConnectorStatus
    target_persona_id: str
    target_session_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., provider: _Optional[str] = ..., event_kinds: _Optional[_Iterable[str]] = ..., delivery_mode: _Optional[_Union[ConnectorDeliveryMode, str]] = ..., target_persona_id: _Optional[str] = ..., target_session_id: _Optional[str] = ..., status: _Optional[_Union[ConnectorStatus, str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CreateConnectorResponse(_message.Message):
    __slots__ = ["connector"]
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    connector: Connector
    def __init__(self, connector: _Optional[_Union[Connector, _Mapping]] = ...) -> None: ...

class DeliverConnectorEventRequest(_message.Message):
    __slots__ = ["connector_id", "delivery_id", "event_kind", "payload", "text"]
    CONNECTOR_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_KIND_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    connector_id: str
    delivery_id: str
    event_kind: str
    payload: _struct_pb2.Struct
    text: str
    def __init__(self, connector_id: _Optional[str] = ..., delivery_id: _Optional[str] = ..., event_kind: _Optional[str] = ..., payload: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., text: _Optional[str] = ...) -> None: ...

class DeliverConnectorEventResponse(_message.Message):
    __slots__ = ["deduplicated", "delivery"]
    DEDUPLICATED_FIELD_NUMBER: _ClassVar[int]
    DELIVERY_FIELD_NUMBER: _ClassVar[int]
    deduplicated: bool
    delivery: ConnectorDelivery
    def __init__(self, delivery: _Optional[_Union[ConnectorDelivery, _Mapping]] = ..., deduplicated: bool = ...) -> None: ...

class GetConnectorRequest(_message.Message):
    __slots__ = ["connector_id"]
    CONNECTOR_ID_FIELD_NUMBER: _ClassVar[int]
    connector_id: str
    def __init__(self, connector_id: _Optional[str] = ...) -> None: ...

class GetConnectorResponse(_message.Message):
    __slots__ = ["connector"]
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    connector: Connector
    def __init__(self, connector: _Optional[_Union[Connector, _Mapping]] = ...) -> None: ...

class ListConnectorsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListConnectorsResponse(_message.Message):
    __slots__ = ["connectors", "next_page_token"]
    CONNECTORS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    connectors: _containers.RepeatedCompositeFieldContainer[Connector]
    next_page_token: str
    def __init__(self, connectors: _Optional[_Iterable[_Union[Connector, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class UpdateConnectorRequest(_message.Message):
    __slots__ = ["connector_id", "reason", "status"]
    CONNECTOR_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    connector_id: str
    reason: str
    status: ConnectorStatus
    def __init__(self, connector_id: _Optional[str] = ..., status: _Optional[_Union[ConnectorStatus, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class UpdateConnectorResponse(_message.Message):
    __slots__ = ["connector"]
    CONNECTOR_FIELD_NUMBER: _ClassVar[int]
    connector: Connector
    def __init__(self, connector: _Optional[_Union[Connector, _Mapping]] = ...) -> None: ...

class ConnectorStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ConnectorDeliveryMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
