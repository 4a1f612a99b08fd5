#!/usr/bin/env python3
"""Generate the Python gRPC code under ``common/pb`` from ``proto/``.

Usage::

    python tools/gen_proto.py            # regenerate common/pb in place
    python tools/gen_proto.py --out DIR  # generate into DIR instead (DIR = the `common/pb` root)
    python tools/gen_proto.py --check    # exit 1 if common/pb differs from a fresh generation

Layout: ``proto/fedanon/v1/party.proto`` becomes ``common/pb/fedanon/v1/party_pb2.py``,
``party_pb2.pyi`` and ``party_pb2_grpc.py``.  protoc writes imports relative to the proto
root (``from fedanon.v1 import party_pb2``); they are rewritten to absolute imports
(``from fedanon.pb.fedanon.v1 import party_pb2``) so the code lives inside the ``common``
package.  The descriptor file name stays ``fedanon/v1/party.proto``.

The output depends on the grpcio-tools version: after upgrading it, regenerate and commit.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROTO_ROOT = REPO / "proto"
DEFAULT_OUT = REPO / "common" / "pb"
PACKAGE = "fedanon.pb"

INIT_TEXT = '"""Generated protobuf/gRPC code. Do not edit: run `python tools/gen_proto.py`."""\n'

# `from fedanon.v1 import party_pb2 as ...` -> `from fedanon.pb.fedanon.v1 import party_pb2 as ...`
_IMPORT_RE = re.compile(r"^from (fedanon(?:\.\w+)*) import (\w+_pb2(?:_grpc)?)\b", re.MULTILINE)


def proto_files() -> list[Path]:
    """All .proto files under proto/, relative to it, sorted."""
    return sorted(p.relative_to(PROTO_ROOT) for p in PROTO_ROOT.rglob("*.proto"))


def _run_protoc(out: Path) -> None:
    import grpc_tools
    from grpc_tools import protoc

    wkt = Path(grpc_tools.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={PROTO_ROOT}",
        f"--proto_path={wkt}",
        f"--python_out={out}",
        f"--pyi_out={out}",
        f"--grpc_python_out={out}",
        *(str(p) for p in proto_files()),
    ]
    rc = protoc.main(args)
    if rc != 0:
        raise SystemExit(f"protoc failed with exit code {rc}")


def generate(out: Path) -> list[Path]:
    """Generate into ``out`` (the directory standing for package ``fedanon.pb``).

    Returns the written files relative to ``out``.  Stale generated files (``*.py``/``*.pyi``
    not produced by this run) are removed from ``out``.
    """
    with tempfile.TemporaryDirectory(prefix="fedanon-proto-") as tmp:
        raw = Path(tmp)
        _run_protoc(raw)
        files: dict[Path, str] = {}
        for path in sorted(raw.rglob("*")):
            if path.is_file() and path.suffix in {".py", ".pyi"}:
                text = path.read_text(encoding="utf-8")
                files[path.relative_to(raw)] = _IMPORT_RE.sub(rf"from {PACKAGE}.\1 import \2", text)
    # Every directory down to the generated modules is a regular package.
    for rel in list(files):
        parent = rel.parent
        while True:
            files.setdefault(parent / "__init__.py", INIT_TEXT)
            if parent == Path("."):
                break
            parent = parent.parent

    out.mkdir(parents=True, exist_ok=True)
    for rel, text in sorted(files.items()):
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
    for stale in sorted(out.rglob("*")):
        rel = stale.relative_to(out)
        generated_looking = stale.suffix in {".py", ".pyi"} and "__pycache__" not in rel.parts
        if stale.is_file() and generated_looking and rel not in files:
            stale.unlink()
    return sorted(files)


def snapshot(root: Path) -> dict[str, str]:
    """Generated-looking files under ``root`` (relative posix path -> text)."""
    return {
        p.relative_to(root).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in {".py", ".pyi"} and "__pycache__" not in p.parts
    }


def check(committed: Path) -> list[str]:
    """Differences between ``committed`` and a fresh generation (empty list = up to date)."""
    with tempfile.TemporaryDirectory(prefix="fedanon-proto-check-") as tmp:
        generate(Path(tmp))
        fresh = snapshot(Path(tmp))
    have = snapshot(committed)
    problems = [f"missing: {name}" for name in sorted(fresh.keys() - have.keys())]
    problems += [f"extra: {name}" for name in sorted(have.keys() - fresh.keys())]
    problems += [
        f"differs: {name}"
        for name in sorted(fresh.keys() & have.keys())
        if fresh[name] != have[name]
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the common/pb root")
    parser.add_argument("--check", action="store_true", help="only compare, do not write")
    ns = parser.parse_args(argv)
    if ns.check:
        problems = check(ns.out)
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            print("generated code is stale: run `python tools/gen_proto.py`", file=sys.stderr)
            return 1
        return 0
    for rel in generate(ns.out):
        print(ns.out / rel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
