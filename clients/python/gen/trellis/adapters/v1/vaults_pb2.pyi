from google.protobuf import field_mask_pb2 as _field_mask_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class CreateVaultRequest(_message.Message):
    __slots__ = ["allowed_agent_ids", "capabilities", "metadata", "provider", "tenant_global", "vault_id", "workspace_id"]
    ALLOWED_AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    TENANT_GLOBAL_FIELD_NUMBER: _ClassVar[int]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    allowed_agent_ids: _containers.RepeatedScalarFieldContainer[str]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    metadata: _struct_pb2.Struct
    provider: str
    tenant_global: bool
    vault_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., provider: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., allowed_agent_ids: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., vault_id: _Optional[str] = ..., tenant_global: bool = ...) -> None: ...

class CreateVaultResponse(_message.Message):
    __slots__ = ["vault"]
    VAULT_FIELD_NUMBER: _ClassVar[int]
    vault: Vault
    def __init__(self, vault: _Optional[_Union[Vault, _Mapping]] = ...) -> None: ...

class DeleteSecretRequest(_message.Message):
    __slots__ = ["name", "vault_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class DeleteSecretResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class DeleteVaultRequest(_message.Message):
    __slots__ = ["vault_id"]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ...) -> None: ...

class DeleteVaultResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetAccessTokenRequest(_message.Message):
    __slots__ = ["vault_id", "workspace_id"]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., vault_id: _Optional[str] = ...) -> None: ...

class GetAccessTokenResponse(_message.Message):
    __slots__ = ["access_token", "expires_at"]
    ACCESS_TOKEN_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    access_token: str
    expires_at: _timestamp_pb2.Timestamp
    def __init__(self, access_token: _Optional[str] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetAgentVaultsRequest(_message.Message):
    __slots__ = ["agent_id", "workspace_id"]
    AGENT_ID_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    agent_id: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., agent_id: _Optional[str] = ...) -> None: ...

class GetAgentVaultsResponse(_message.Message):
    __slots__ = ["vaults"]
    VAULTS_FIELD_NUMBER: _ClassVar[int]
    vaults: _containers.RepeatedCompositeFieldContainer[VaultGrant]
    def __init__(self, vaults: _Optional[_Iterable[_Union[VaultGrant, _Mapping]]] = ...) -> None: ...

class GetVaultRequest(_message.Message):
    __slots__ = ["vault_id"]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ...) -> None: ...

class GetVaultResponse(_message.Message):
    __slots__ = ["vault"]
    VAULT_FIELD_NUMBER: _ClassVar[int]
    vault: Vault
    def __init__(self, vault: _Optional[_Union[Vault, _Mapping]] = ...) -> None: ...

class ListSecretsRequest(_message.Message):
    __slots__ = ["vault_id"]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ...) -> None: ...

class ListSecretsResponse(_message.Message):
    __slots__ = ["secrets"]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    secrets: _containers.RepeatedCompositeFieldContainer[SecretInfo]
    def __init__(self, secrets: _Optional[_Iterable[_Union[SecretInfo, _Mapping]]] = ...) -> None: ...

class ListVaultsRequest(_message.Message):
    __slots__ = ["page_size", "page_token", "workspace_id"]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListVaultsResponse(_message.Message):
    __slots__ = ["next_page_token", "vaults"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    VAULTS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    vaults: _containers.RepeatedCompositeFieldContainer[Vault]
    def __init__(self, vaults: _Optional[_Iterable[_Union[Vault, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class PutSecretRequest(_message.Message):
    __slots__ = ["name", "value", "vault_id"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ..., name: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class PutSecretResponse(_message.Message):
    __slots__ = ["secret"]
    SECRET_FIELD_NUMBER: _ClassVar[int]
    secret: SecretInfo
    def __init__(self, secret: _Optional[_Union[SecretInfo, _Mapping]] = ...) -> None: ...

class SecretInfo(_message.Message):
    __slots__ = ["created_at", "name", "size_bytes", "updated_at"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    name: str
    size_bytes: int
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, name: _Optional[str] = ..., size_bytes: _Optional[int] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateVaultRequest(_message.Message):
    __slots__ = ["allowed_agent_ids", "capabilities", "metadata", "update_mask", "vault_id"]
    ALLOWED_AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    UPDATE_MASK_FIELD_NUMBER: _ClassVar[int]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    allowed_agent_ids: _containers.RepeatedScalarFieldContainer[str]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    metadata: _struct_pb2.Struct
    update_mask: _field_mask_pb2.FieldMask
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., allowed_agent_ids: _Optional[_Iterable[str]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., update_mask: _Optional[_Union[_field_mask_pb2.FieldMask, _Mapping]] = ...) -> None: ...

class UpdateVaultResponse(_message.Message):
    __slots__ = ["vault"]
    VAULT_FIELD_NUMBER: _ClassVar[int]
    vault: Vault
    def __init__(self, vault: _Optional[_Union[Vault, _Mapping]] = ...) -> None: ...

class Vault(_message.Message):
    __slots__ = ["allowed_agent_ids", "capabilities", "created_at", "id", "metadata", "provider", "updated_at", "workspace_id"]
    ALLOWED_AGENT_IDS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    allowed_agent_ids: _containers.RepeatedScalarFieldContainer[str]
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    created_at: _timestamp_pb2.Timestamp
    id: str
    metadata: _struct_pb2.Struct
    provider: str
    updated_at: _timestamp_pb2.Timestamp
    workspace_id: str
    def __init__(self, id: _Optional[str] = ..., workspace_id: _Optional[str] = ..., provider: _Optional[str] = ..., capabilities: _Optional[_Iterable[str]] = ..., allowed_agent_ids: _Optional[_Iterable[str]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., metadata: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class VaultGrant(_message.Message):
    __slots__ = ["allowed", "fingerprints", "reason", "secrets", "vault_id"]
    class FingerprintsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SecretsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ALLOWED_FIELD_NUMBER: _ClassVar[int]
    FINGERPRINTS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SECRETS_FIELD_NUMBER: _ClassVar[int]
    VAULT_ID_FIELD_NUMBER: _ClassVar[int]
    allowed: bool
    fingerprints: _containers.ScalarMap[str, str]
    reason: str
    secrets: _containers.ScalarMap[str, str]
    vault_id: str
    def __init__(self, vault_id: _Optional[str] = ..., allowed: bool = ..., reason: _Optional[str] = ..., secrets: _Optional[_Mapping[str, str]] = ..., fingerprints: _Optional[_Mapping[str, str]] = ...) -> None: ...
