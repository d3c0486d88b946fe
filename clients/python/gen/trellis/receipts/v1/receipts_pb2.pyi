from google.protobuf import timestamp_pb2 as _timestamp_pb2
from trellis.core.v1 import event_pb2 as _event_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
RECEIPT_FINAL_STATE_CANCELED: ReceiptFinalState
RECEIPT_FINAL_STATE_FAILED: ReceiptFinalState
RECEIPT_FINAL_STATE_SUCCEEDED: ReceiptFinalState
RECEIPT_FINAL_STATE_UNSPECIFIED: ReceiptFinalState

class GetPublicKeysRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetPublicKeysResponse(_message.Message):
    __slots__ = ["current_key_id", "keys"]
    CURRENT_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    current_key_id: str
    keys: _containers.RepeatedCompositeFieldContainer[PublicKey]
    def __init__(self, keys: _Optional[_Iterable[_Union[PublicKey, _Mapping]]] = ..., current_key_id: _Optional[str] = ...) -> None: ...

class GetReceiptRequest(_message.Message):
    __slots__ = ["receipt_id"]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    receipt_id: str
    def __init__(self, receipt_id: _Optional[str] = ...) -> None: ...

class GetReceiptResponse(_message.Message):
    __slots__ = ["receipt"]
    RECEIPT_FIELD_NUMBER: _ClassVar[int]
    receipt: Receipt
    def __init__(self, receipt: _Optional[_Union[Receipt, _Mapping]] = ...) -> None: ...

class ListReceiptsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListReceiptsResponse(_message.Message):
    __slots__ = ["next_page_token", "receipts"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    receipts: _containers.RepeatedCompositeFieldContainer[Receipt]
    def __init__(self, receipts: _Optional[_Iterable[_Union[Receipt, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListTaskReceiptsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "task_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    task_id: str
    def __init__(self, task_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListTaskReceiptsResponse(_message.Message):
    __slots__ = ["next_page_token", "receipts"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECEIPTS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    receipts: _containers.RepeatedCompositeFieldContainer[Receipt]
    def __init__(self, receipts: _Optional[_Iterable[_Union[Receipt, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PublicKey(_message.Message):
    __slots__ = ["algorithm", "created_at", "current", "jwk_x", "key_id", "public_key_pem"]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    CURRENT_FIELD_NUMBER: _ClassVar[int]
    JWK_X_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_PEM_FIELD_NUMBER: _ClassVar[int]
    algorithm: str
    created_at: _timestamp_pb2.Timestamp
    current: bool
    jwk_x: str
    key_id: str
    public_key_pem: str
    def __init__(self, key_id: _Optional[str] = ..., algorithm: _Optional[str] = ..., public_key_pem: _Optional[str] = ..., jwk_x: _Optional[str] = ..., current: bool = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Receipt(_message.Message):
    __slots__ = ["chain_index", "document_json", "final_state", "id", "issued_at", "key_id", "previous_receipt_hash", "receipt_hash", "schema", "session_id", "subject", "task_id", "workspace_id"]
    CHAIN_INDEX_FIELD_NUMBER: _ClassVar[int]
    DOCUMENT_JSON_FIELD_NUMBER: _ClassVar[int]
    FINAL_STATE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    ISSUED_AT_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_RECEIPT_HASH_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_HASH_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TASK_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    chain_index: int
    document_json: str
    final_state: ReceiptFinalState
    id: str
    issued_at: _timestamp_pb2.Timestamp
    key_id: str
    previous_receipt_hash: str
    receipt_hash: str
    schema: str
    session_id: str
    subject: _event_pb2.ResourceRef
    task_id: str
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., subject: _Optional[_Union[_event_pb2.ResourceRef, _Mapping]] = ..., task_id: _Optional[str] = ..., session_id: _Optional[str] = ..., receipt_hash: _Optional[str] = ..., previous_receipt_hash: _Optional[str] = ..., chain_index: _Optional[int] = ..., key_id: _Optional[str] = ..., issued_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., final_state: _Optional[_Union[ReceiptFinalState, str]] = ..., schema: _Optional[str] = ..., document_json: _Optional[str] = ...) -> None: ...

class VerificationProblem(_message.Message):
    __slots__ = ["code", "field", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    FIELD_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: str
    field: str
    message: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., field: _Optional[str] = ...) -> None: ...

class VerifyReceiptRequest(_message.Message):
    __slots__ = ["document_json", "receipt_id", "trust_anchor_key_id"]
    DOCUMENT_JSON_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    TRUST_ANCHOR_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    document_json: str
    receipt_id: str
    trust_anchor_key_id: str
    def __init__(self, receipt_id: _Optional[str] = ..., document_json: _Optional[str] = ..., trust_anchor_key_id: _Optional[str] = ...) -> None: ...

class VerifyReceiptResponse(_message.Message):
    __slots__ = ["checked_at", "checks", "key_id", "problems", "receipt_id", "valid"]
    CHECKED_AT_FIELD_NUMBER: _ClassVar[int]
    CHECKS_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    PROBLEMS_FIELD_NUMBER: _ClassVar[int]
    RECEIPT_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FIELD_NUMBER: _ClassVar[int]
    checked_at: _timestamp_pb2.Timestamp
    checks: _containers.RepeatedScalarFieldContainer[str]
    key_id: str
    problems: _containers.RepeatedCompositeFieldContainer[VerificationProblem]
    receipt_id: str
    valid: bool
    def __init__(self, valid: bool = ..., checked_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., problems: _Optional[_Iterable[_Union[VerificationProblem, _Mapping]]] = ..., checks: _Optional[_Iterable[str]] = ..., receipt_id: _Optional[str] = ..., key_id: _Optional[str] = ...) -> None: ...

class ReceiptFinalState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
