"""A new user's own data: a blood-transfusion table with free-text remarks (commas, quotes,
line breaks), non-ASCII labels, ';'-separated exports and diagnosis codes. Each test is a
defect found by running fedanon on such a table (it fails before its fix)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedanon.api import Spec, anonymize
from fedanon.errors import DataError

TABLE1 = Path(__file__).parent.parent.parent / "examples" / "table1"


def test_a_frame_error_names_the_row_when_a_cell_holds_a_line_break() -> None:
    # a free-text column with a line break in an earlier row: the CSV the reader sees has
    # more lines than rows, and the error said "<DataFrame> as CSV, line 5", not the row
    frame = pd.read_csv(TABLE1 / "table1.csv").set_index("ID", drop=False)
    frame["Surgery"] = frame["Surgery"].astype(object)
    frame.loc[2, "Surgery"] = "Plastic\nsecond line"
    frame.loc[4, "Surgery"] = "Vascular\r\nthird, line"
    frame.loc[7, "Job"] = "Astronaut"
    with pytest.raises(DataError) as err:
        anonymize(frame, Spec.from_toml(TABLE1 / "run.toml"))
    text = str(err.value)
    assert "<DataFrame> row 6 (index 7)" in text and "'Job'" in text, text


@pytest.mark.parametrize("copies", [1, 2000])  # Python's csv reader; Arrow's (over 64 KB)
def test_a_frame_cell_holding_a_bare_cr_is_kept_not_split(copies: int) -> None:
    # free text exported from an old system ends lines in a bare CR; the frame was written
    # to the reader unquoted there, and the row was refused as 'row has 1 fields'
    frame = pd.read_csv(TABLE1 / "table1.csv")
    frame = pd.concat([frame] * copies, ignore_index=True)
    frame["Surgery"] = frame["Surgery"].astype(object)
    frame.loc[1, "Surgery"] = "Plastic\rrevision, 2nd"
    spec = Spec.from_toml(TABLE1 / "run.toml")
    release = anonymize(frame, spec)
    assert list(release.table["Surgery"]) == list(frame["Surgery"])
    frame.loc[len(frame) - 2, "Job"] = "Astronaut"
    with pytest.raises(DataError) as err:
        anonymize(frame, spec)
    # Arrow counts a bare CR's records, not lines (docs/anonymize.md): it names the record
    where = f"<DataFrame> row {len(frame) - 2} " if copies == 1 else f"record {len(frame) - 1} "
    assert where in str(err.value), str(err.value)
