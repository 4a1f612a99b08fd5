"""A hospital's party of DiffGen over diagnosis codes, as a daemon's Prepare builds it through
the method (fedanon.dp.method: schema, party_table, new_party; fedanon.dp.setfed.CodesParty):
the item taxonomy file is shipped and binds the run hash; the party answers what the
in-process SetParty answers and refuses what the leader may not ask (more than h selections,
the final counts before the end instruction, statistics after it, a record union)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fedanon.dp.setfed import CodesParty, CodesTable
from fedanon.errors import ProtocolError
from fedanon.io.table import encode_table
from fedanon.methods import registry
from fedanon.model.spec import load_spec
from fedanon.tds.state import Phase, Update

HERE = Path(__file__).parent / "dp_codes"


def _party(tmp: Path | None = None) -> tuple[CodesParty, bytes]:
    spec_path = HERE / "table1.toml"
    method = registry.get("dp")
    spec, reader = load_spec(spec_path, method.capabilities.set_valued)
    if tmp is not None:  # the same spec with another item taxonomy text

        def reader(rel: str, base=reader) -> str:  # type: ignore[no-redef]
            text = base(rel)
            return text + "  3*\n" if rel == "codes.txt" else text

    schema = method.schema(spec, reader)
    table = encode_table(schema, HERE / "table1.csv")
    codes = method.party_table(spec, schema, table, HERE / "table1.csv")
    assert isinstance(codes, CodesTable) and codes.n_rows == 8
    party = method.new_party(spec, schema, codes)
    assert isinstance(party, CodesParty)
    return party, method.run_hash(spec, schema.files)


def test_the_item_taxonomy_is_shipped_and_binds_the_run(tmp_path: Path) -> None:
    _, digest = _party()
    method = registry.get("dp")
    spec, reader = load_spec(HERE / "table1.toml", True)
    files = method.schema(spec, reader).files
    assert files["codes.txt"] == (HERE / "codes.txt").read_text()
    _, other = _party(tmp_path)
    assert other != digest


def test_statistics_and_the_refusals() -> None:
    party, _ = _party()
    st = party.state
    lay = st.counts_layout()
    vec = party.stats(Phase.COUNTS, 0, lay.size, lay.digest)
    (codes,) = [b for b in lay.blocks if b.attr == st.m]
    cells = vec[codes.offset : codes.offset + codes.rows * 2].reshape(-1, 3, 2)
    assert cells[0].tolist() == [[2, 2], [0, 0], [2, 2]]  # Table 1: {1*}, {2*}, {1*, 2*}
    fin = st.final_layout()
    with pytest.raises(ProtocolError, match="final counts"):
        party.stats(Phase.UNION, 0, fin.size, fin.digest)  # before the end instruction
    party.apply(Update(0, best=(st.m, 0), children_mask=bytes([1, 0, 1])))
    n_sex = sum(1 for p in st.alive_ids().tolist() if st.prel[p][0] == 0)
    party.apply(Update(1, best=(0, 0), children_mask=bytes([1] * (2 * n_sex))))
    cand = st.candidates()[0]
    with pytest.raises(ProtocolError, match="selection 3 of a DP run with h = 2"):
        party.apply(Update(2, best=cand, children_mask=b"\x01"))
    party.apply(Update(2, end=True))
    lay = st.counts_layout()
    with pytest.raises(ProtocolError, match="final counts"):
        party.stats(Phase.COUNTS, 2, lay.size, lay.digest)  # after the end: only the release
    with pytest.raises(ProtocolError, match="after end"):
        party.apply(Update(2))
    fin = st.final_layout()
    counts = party.stats(Phase.UNION, 2, fin.size, fin.digest)
    assert int(np.sum(counts)) == 8


def test_no_record_union() -> None:
    party, _ = _party()

    class Sketch:
        digest = b"x"

    with pytest.raises(ProtocolError, match="no record union"):
        party.apply(Update(0, union=Sketch()))
