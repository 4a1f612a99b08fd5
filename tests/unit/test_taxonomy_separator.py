"""An ARX hierarchy saved with a spreadsheet's separator (',' or a tab) is refused naming the
separator ARX uses, not as rows 'ending in different roots' (found with a blood-group hierarchy
saved as comma CSV by the odd-tables review)."""

from __future__ import annotations

import pytest

from fedanon.errors import TaxonomyError
from fedanon.model.taxonomy import parse_arx, parse_taxonomy


@pytest.mark.parametrize(("sep", "named"), [(",", "','"), ("\t", "a tab")])
def test_a_hierarchy_with_another_separator_names_it(sep: str, named: str) -> None:
    text = "".join(
        sep.join(r) + "\r\n" for r in [("O+", "O", "*"), ("O-", "O", "*"), ("A+", "A", "*")]
    )
    with pytest.raises(TaxonomyError) as err:
        parse_arx(text, "blood.csv")
    msg = str(err.value)
    assert "blood.csv, line 1" in msg and named in msg and "';'" in msg
    assert "same root" not in msg


def test_labels_with_commas_still_read() -> None:
    tax = parse_taxonomy("80000;Nord, Ost;*\n80100;Süd, West;*\n", "zip.csv")
    assert set(tax.labels) == {"*", "Nord, Ost", "Süd, West", "80000", "80100"}
