"""The privacy officer's page for a release (the ``fedanon report`` command is
:mod:`fedanon.cli.report`), and ``--html`` on the commands that make one (``anonymize``,
``federate``, ``leader run``).

With ``--html`` the page is published together with the released table and the run report:
the run's writes to those two paths are held as temporaries (:func:`fedanon.io.fsutil.hold`),
the page is built from them, and the three files are renamed into place together -- a run or
a page that fails publishes none of them."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fedanon.errors import InputError

log = logging.getLogger(__name__)


def add_html_option(p: Any) -> None:
    """``--html`` on a command that publishes a release (needs its JSON report too)."""
    p.add_argument(
        "--html",
        type=Path,
        help="also write the privacy officer's HTML report of the release (published with "
        "the table and the JSON report, all or none; needs the JSON report)",
    )


def render_page(inputs: Any) -> str:
    from fedanon.report.build import build
    from fedanon.report.html import render

    return render(build(inputs))


@contextmanager
def html_with_outputs(
    html: Path | None,
    spec: Any,
    output: Path,
    report: Path | None,
    *,
    report_flag: str = "--report",
    reads: Sequence[Path] = (),
) -> Iterator[None]:
    """Around a run that writes ``output`` and ``report``: with ``html``, hold both, build the
    page from what the run wrote and publish the three together (nothing without ``html``).
    ``spec``: the run's parsed spec (fedanon.Spec; None without ``html``)."""
    if html is None:
        yield
        return
    from fedanon.io.fsutil import Pending, check_outputs, hold
    from fedanon.report.build import Inputs

    if report is None:
        raise InputError(
            f"--html needs the run's JSON report ({report_flag}): the page shows what it records",
            file=str(html),
            expected=f"{report_flag} PATH with --html",
        )
    reads = [*spec.input_files(), *reads]
    check_outputs({"--html": html, "output": output, "report": report}, reads)
    with hold([output, report]) as held:
        yield
        table, rep = held.temp_of(output), held.temp_of(report)
        if table is None or rep is None:
            raise InputError("the run published no table to report on", file=str(output))
        from fedanon.pandasgate import allow_pandas

        allow_pandas()  # the leader keeps Arrow from importing pandas; the page needs it
        page = render_page(
            Inputs(spec, table, None, rep, released_name=str(output), run_report_name=str(report))
        )
        held.publish([Pending(html, lambda fh: fh.write(page))])
    log.info("HTML report -> %s", html)
