"""The committed generated code in common/pb matches a fresh generation from proto/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
COMMITTED = REPO / "common" / "pb"


def _snapshot(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in {".py", ".pyi"} and "__pycache__" not in p.parts
    }


def test_generated_code_is_up_to_date(tmp_path: Path) -> None:
    out = tmp_path / "pb"
    subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_proto.py"), "--out", str(out)],
        check=True,
        cwd=tmp_path,
        capture_output=True,
    )
    fresh = _snapshot(out)
    committed = _snapshot(COMMITTED)
    assert "fedanon/v1/party_pb2.py" in fresh
    assert "fedanon/v1/party_pb2.pyi" in fresh
    assert "fedanon/v1/party_pb2_grpc.py" in fresh
    missing = sorted(fresh.keys() - committed.keys())
    extra = sorted(committed.keys() - fresh.keys())
    differ = sorted(k for k in fresh.keys() & committed.keys() if fresh[k] != committed[k])
    assert not (missing or extra or differ), (
        f"common/pb is stale (missing={missing}, extra={extra}, differ={differ}); "
        "run `python tools/gen_proto.py` and commit the result"
    )


def test_check_mode_agrees() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "gen_proto.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_generated_imports_are_package_absolute() -> None:
    grpc_module = (COMMITTED / "fedanon" / "v1" / "party_pb2_grpc.py").read_text()
    assert "from fedanon.pb.fedanon.v1 import party_pb2" in grpc_module
    assert "\nfrom fedanon.v1 " not in grpc_module  # protoc's root-relative import, rewritten


def test_service_shape() -> None:
    from fedanon.pb.fedanon.v1 import party_pb2, party_pb2_grpc

    service = party_pb2.DESCRIPTOR.services_by_name["Party"]
    assert party_pb2.DESCRIPTOR.package == "fedanon.v1"
    shape = {
        m.name: (m.client_streaming, m.server_streaming, m.input_type.name, m.output_type.name)
        for m in service.methods
    }
    assert shape == {
        "Prepare": (False, False, "PrepareRequest", "PrepareReply"),
        "Relay": (True, False, "VectorChunk", "Ack"),
        "Collect": (False, True, "CollectRequest", "VectorChunk"),
        "Instruct": (False, False, "Instruction", "Ack"),
        "PairKeys": (False, False, "PairKeysRequest", "Ack"),
        "Contribute": (False, True, "ContributeRequest", "VectorChunk"),
        "UnionKey": (False, False, "UnionKeyRequest", "SignedKey"),
        "UnionBatch": (False, True, "UnionBatchRequest", "Blob"),
        "Mix": (True, True, "MixChunk", "Blob"),
        "Status": (False, False, "StatusRequest", "RunStatus"),
        "CoalitionCheck": (False, False, "CoalitionCheckRequest", "CoalitionCheckReply"),
        "Abort": (False, False, "AbortRequest", "Ack"),
        "Finish": (False, False, "FinishRequest", "Ack"),
    }
    assert party_pb2.PHASE_SPLIT == 1 and party_pb2.PHASE_COUNTS == 2
    assert hasattr(party_pb2_grpc, "PartyStub")
    assert hasattr(party_pb2_grpc, "add_PartyServicer_to_server")
    req = party_pb2.PrepareRequest(
        run_id=b"\x00" * 16,
        spec_toml="x = 1",
        files={"tax/age.csv": b"a,b"},
        ring=[party_pb2.PartyRef(name="alice", address="alice:7443")],
        ring_position=0,
    )
    assert party_pb2.PrepareRequest.FromString(req.SerializeToString()) == req
