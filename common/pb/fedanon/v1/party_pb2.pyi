from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SecureSum(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SECURE_SUM_UNSPECIFIED: _ClassVar[SecureSum]
    SECURE_SUM_RING: _ClassVar[SecureSum]
    SECURE_SUM_PAIRWISE: _ClassVar[SecureSum]

class Phase(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PHASE_UNSPECIFIED: _ClassVar[Phase]
    PHASE_SPLIT: _ClassVar[Phase]
    PHASE_COUNTS: _ClassVar[Phase]
    PHASE_UNION: _ClassVar[Phase]
    PHASE_UNION_LENGTHS: _ClassVar[Phase]
    PHASE_UNION_SKETCH: _ClassVar[Phase]
SECURE_SUM_UNSPECIFIED: SecureSum
SECURE_SUM_RING: SecureSum
SECURE_SUM_PAIRWISE: SecureSum
PHASE_UNSPECIFIED: Phase
PHASE_SPLIT: Phase
PHASE_COUNTS: Phase
PHASE_UNION: Phase
PHASE_UNION_LENGTHS: Phase
PHASE_UNION_SKETCH: Phase

class PartyRef(_message.Message):
    __slots__ = ("name", "address", "mpc_address")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    MPC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    name: str
    address: str
    mpc_address: str
    def __init__(self, name: _Optional[str] = ..., address: _Optional[str] = ..., mpc_address: _Optional[str] = ...) -> None: ...

class PrepareRequest(_message.Message):
    __slots__ = ("run_id", "spec_toml", "files", "ring", "ring_position", "secure_sum")
    class FilesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: bytes
        def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SPEC_TOML_FIELD_NUMBER: _ClassVar[int]
    FILES_FIELD_NUMBER: _ClassVar[int]
    RING_FIELD_NUMBER: _ClassVar[int]
    RING_POSITION_FIELD_NUMBER: _ClassVar[int]
    SECURE_SUM_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    spec_toml: str
    files: _containers.ScalarMap[str, bytes]
    ring: _containers.RepeatedCompositeFieldContainer[PartyRef]
    ring_position: int
    secure_sum: SecureSum
    def __init__(self, run_id: _Optional[bytes] = ..., spec_toml: _Optional[str] = ..., files: _Optional[_Mapping[str, bytes]] = ..., ring: _Optional[_Iterable[_Union[PartyRef, _Mapping]]] = ..., ring_position: _Optional[int] = ..., secure_sum: _Optional[_Union[SecureSum, str]] = ...) -> None: ...

class PrepareReply(_message.Message):
    __slots__ = ("run_hash", "name", "sum_key")
    RUN_HASH_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    SUM_KEY_FIELD_NUMBER: _ClassVar[int]
    run_hash: bytes
    name: str
    sum_key: SignedKey
    def __init__(self, run_hash: _Optional[bytes] = ..., name: _Optional[str] = ..., sum_key: _Optional[_Union[SignedKey, _Mapping]] = ...) -> None: ...

class PairKeysRequest(_message.Message):
    __slots__ = ("run_id", "keys")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    keys: _containers.RepeatedCompositeFieldContainer[SignedKey]
    def __init__(self, run_id: _Optional[bytes] = ..., keys: _Optional[_Iterable[_Union[SignedKey, _Mapping]]] = ...) -> None: ...

class ContributeRequest(_message.Message):
    __slots__ = ("run_id", "round", "phase", "layout_hash", "total_len", "instructions", "sum", "carried")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_HASH_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LEN_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    CARRIED_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    round: int
    phase: Phase
    layout_hash: bytes
    total_len: int
    instructions: int
    sum: int
    carried: _containers.RepeatedCompositeFieldContainer[Instruction]
    def __init__(self, run_id: _Optional[bytes] = ..., round: _Optional[int] = ..., phase: _Optional[_Union[Phase, str]] = ..., layout_hash: _Optional[bytes] = ..., total_len: _Optional[int] = ..., instructions: _Optional[int] = ..., sum: _Optional[int] = ..., carried: _Optional[_Iterable[_Union[Instruction, _Mapping]]] = ...) -> None: ...

class VectorHeader(_message.Message):
    __slots__ = ("run_id", "round", "phase", "layout_hash", "total_len", "instructions", "chain")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_HASH_FIELD_NUMBER: _ClassVar[int]
    TOTAL_LEN_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    round: int
    phase: Phase
    layout_hash: bytes
    total_len: int
    instructions: int
    chain: bytes
    def __init__(self, run_id: _Optional[bytes] = ..., round: _Optional[int] = ..., phase: _Optional[_Union[Phase, str]] = ..., layout_hash: _Optional[bytes] = ..., total_len: _Optional[int] = ..., instructions: _Optional[int] = ..., chain: _Optional[bytes] = ...) -> None: ...

class VectorChunk(_message.Message):
    __slots__ = ("header", "seq", "data", "sum")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SUM_FIELD_NUMBER: _ClassVar[int]
    header: VectorHeader
    seq: int
    data: bytes
    sum: int
    def __init__(self, header: _Optional[_Union[VectorHeader, _Mapping]] = ..., seq: _Optional[int] = ..., data: _Optional[bytes] = ..., sum: _Optional[int] = ...) -> None: ...

class Ack(_message.Message):
    __slots__ = ("ok",)
    OK_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    def __init__(self, ok: _Optional[bool] = ...) -> None: ...

class CollectRequest(_message.Message):
    __slots__ = ("run_id", "round", "phase")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    round: int
    phase: Phase
    def __init__(self, run_id: _Optional[bytes] = ..., round: _Optional[int] = ..., phase: _Optional[_Union[Phase, str]] = ...) -> None: ...

class NodeRef(_message.Message):
    __slots__ = ("attr", "node")
    ATTR_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    attr: int
    node: int
    def __init__(self, attr: _Optional[int] = ..., node: _Optional[int] = ...) -> None: ...

class Split(_message.Message):
    __slots__ = ("attr", "node", "split")
    ATTR_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SPLIT_FIELD_NUMBER: _ClassVar[int]
    attr: int
    node: int
    split: int
    def __init__(self, attr: _Optional[int] = ..., node: _Optional[int] = ..., split: _Optional[int] = ...) -> None: ...

class Instruction(_message.Message):
    __slots__ = ("run_id", "round", "best", "splits", "invalid", "children_mask", "end", "seq", "union_sketch", "chained")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    BEST_FIELD_NUMBER: _ClassVar[int]
    SPLITS_FIELD_NUMBER: _ClassVar[int]
    INVALID_FIELD_NUMBER: _ClassVar[int]
    CHILDREN_MASK_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    UNION_SKETCH_FIELD_NUMBER: _ClassVar[int]
    CHAINED_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    round: int
    best: NodeRef
    splits: _containers.RepeatedCompositeFieldContainer[Split]
    invalid: _containers.RepeatedCompositeFieldContainer[NodeRef]
    children_mask: bytes
    end: bool
    seq: int
    union_sketch: UnionSketch
    chained: bool
    def __init__(self, run_id: _Optional[bytes] = ..., round: _Optional[int] = ..., best: _Optional[_Union[NodeRef, _Mapping]] = ..., splits: _Optional[_Iterable[_Union[Split, _Mapping]]] = ..., invalid: _Optional[_Iterable[_Union[NodeRef, _Mapping]]] = ..., children_mask: _Optional[bytes] = ..., end: _Optional[bool] = ..., seq: _Optional[int] = ..., union_sketch: _Optional[_Union[UnionSketch, _Mapping]] = ..., chained: _Optional[bool] = ...) -> None: ...

class SketchTable(_message.Message):
    __slots__ = ("size_class", "records", "lane_bytes", "width", "cells", "max_multiplicity")
    SIZE_CLASS_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    LANE_BYTES_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    CELLS_FIELD_NUMBER: _ClassVar[int]
    MAX_MULTIPLICITY_FIELD_NUMBER: _ClassVar[int]
    size_class: int
    records: int
    lane_bytes: int
    width: int
    cells: int
    max_multiplicity: int
    def __init__(self, size_class: _Optional[int] = ..., records: _Optional[int] = ..., lane_bytes: _Optional[int] = ..., width: _Optional[int] = ..., cells: _Optional[int] = ..., max_multiplicity: _Optional[int] = ...) -> None: ...

class UnionSketch(_message.Message):
    __slots__ = ("key", "n_fields", "tables", "split_key", "part", "parts")
    KEY_FIELD_NUMBER: _ClassVar[int]
    N_FIELDS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    SPLIT_KEY_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    n_fields: int
    tables: _containers.RepeatedCompositeFieldContainer[SketchTable]
    split_key: bytes
    part: int
    parts: int
    def __init__(self, key: _Optional[bytes] = ..., n_fields: _Optional[int] = ..., tables: _Optional[_Iterable[_Union[SketchTable, _Mapping]]] = ..., split_key: _Optional[bytes] = ..., part: _Optional[int] = ..., parts: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    def __init__(self, run_id: _Optional[bytes] = ...) -> None: ...

class RunStatus(_message.Message):
    __slots__ = ("instructions", "received", "done", "failed_party", "failed_phase", "failed_kind", "failed_detail", "preparing", "rows_read")
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    RECEIVED_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    FAILED_PARTY_FIELD_NUMBER: _ClassVar[int]
    FAILED_PHASE_FIELD_NUMBER: _ClassVar[int]
    FAILED_KIND_FIELD_NUMBER: _ClassVar[int]
    FAILED_DETAIL_FIELD_NUMBER: _ClassVar[int]
    PREPARING_FIELD_NUMBER: _ClassVar[int]
    ROWS_READ_FIELD_NUMBER: _ClassVar[int]
    instructions: int
    received: int
    done: int
    failed_party: str
    failed_phase: str
    failed_kind: str
    failed_detail: str
    preparing: bool
    rows_read: int
    def __init__(self, instructions: _Optional[int] = ..., received: _Optional[int] = ..., done: _Optional[int] = ..., failed_party: _Optional[str] = ..., failed_phase: _Optional[str] = ..., failed_kind: _Optional[str] = ..., failed_detail: _Optional[str] = ..., preparing: _Optional[bool] = ..., rows_read: _Optional[int] = ...) -> None: ...

class UnionKeyRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    def __init__(self, run_id: _Optional[bytes] = ...) -> None: ...

class SignedKey(_message.Message):
    __slots__ = ("name", "public_key", "signature", "cert_pem")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    CERT_PEM_FIELD_NUMBER: _ClassVar[int]
    name: str
    public_key: bytes
    signature: bytes
    cert_pem: bytes
    def __init__(self, name: _Optional[str] = ..., public_key: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., cert_pem: _Optional[bytes] = ...) -> None: ...

class UnionBatchRequest(_message.Message):
    __slots__ = ("run_id", "keys", "pad_size")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    PAD_SIZE_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    keys: _containers.RepeatedCompositeFieldContainer[SignedKey]
    pad_size: int
    def __init__(self, run_id: _Optional[bytes] = ..., keys: _Optional[_Iterable[_Union[SignedKey, _Mapping]]] = ..., pad_size: _Optional[int] = ...) -> None: ...

class Blob(_message.Message):
    __slots__ = ("data",)
    DATA_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    def __init__(self, data: _Optional[bytes] = ...) -> None: ...

class MixHeader(_message.Message):
    __slots__ = ("run_id", "hop", "expected_count")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HOP_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_COUNT_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    hop: int
    expected_count: int
    def __init__(self, run_id: _Optional[bytes] = ..., hop: _Optional[int] = ..., expected_count: _Optional[int] = ...) -> None: ...

class MixChunk(_message.Message):
    __slots__ = ("header", "blob")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    BLOB_FIELD_NUMBER: _ClassVar[int]
    header: MixHeader
    blob: bytes
    def __init__(self, header: _Optional[_Union[MixHeader, _Mapping]] = ..., blob: _Optional[bytes] = ...) -> None: ...

class CoalitionCheckRequest(_message.Message):
    __slots__ = ("run_id", "check", "instructions", "candidate")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    CHECK_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    check: int
    instructions: int
    candidate: NodeRef
    def __init__(self, run_id: _Optional[bytes] = ..., check: _Optional[int] = ..., instructions: _Optional[int] = ..., candidate: _Optional[_Union[NodeRef, _Mapping]] = ...) -> None: ...

class CoalitionCheckReply(_message.Message):
    __slots__ = ("passes",)
    PASSES_FIELD_NUMBER: _ClassVar[int]
    passes: bool
    def __init__(self, passes: _Optional[bool] = ...) -> None: ...

class AbortRequest(_message.Message):
    __slots__ = ("run_id", "reason")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    reason: str
    def __init__(self, run_id: _Optional[bytes] = ..., reason: _Optional[str] = ...) -> None: ...

class FinishRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: bytes
    def __init__(self, run_id: _Optional[bytes] = ...) -> None: ...
