"""The leader's side of a split sketch union (:mod:`fedanon.union.parts`): the parts are
summed one after the other by a second thread while this one peels and decodes each part
as it arrives, so the parties sketch and stream part ``j + 1`` while the leader peels part
``j``.  One part peels at a time while parts are still being summed (the parties need the
other core); once the last one has arrived, the parts left peel :data:`PEEL_THREADS` at
once.

Only that thread uses the federation until every first attempt is summed (or this side
stops it: it finishes the sum in progress and asks no other).  A part that does not peel is
summed again afterwards, alone, with a fresh key and a grown table (the split stays: its
records are the same); every sum has its own round number, never a repeat.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

from fedanon import union as sk
from fedanon.arrays import IntArray
from fedanon.errors import RunAborted
from fedanon.tds.state import Phase, Update
from fedanon.union.layout import Layout
from fedanon.union.params import SketchParams, Split
from fedanon.union.parts import split_layout
from fedanon.union.recover import Recovery

__all__ = ["PartSums", "SplitResult", "split_union"]

log = logging.getLogger(__name__)
PEEL_THREADS = 2  # parts peeled at once once every part has arrived


class PartSums(Protocol):
    """A secure sum and a broadcast (labelled), as :class:`fedanon.leader.union.UnionSums`."""

    def sum(
        self, phase: Phase, round_: int, size: int, digest: bytes, step: str | None = None
    ) -> IntArray: ...

    def broadcast(self, update: Update, step: str | None = None) -> None: ...


@dataclass
class SplitResult:
    """The records of every part, and what the parts cost."""

    records: sk.PeeledRecords
    sums: int = 0
    vector_bytes: int = 0
    seconds: dict[str, float] = field(default_factory=dict)


def split_union(
    fed: PartSums,
    first_round: int,
    full: Layout,
    distinct: int,
    parts: int,
    known: Sequence[Sequence[str]],
    step: str,
    attempts: int,
) -> SplitResult:
    """Sum the union in ``parts`` parts of ``full`` (the one-sketch layout for at most
    ``distinct`` distinct records) from round ``first_round`` on; peel and decode them.
    Raises :class:`RunAborted` when a part does not peel in ``attempts`` sums,
    :class:`~fedanon.union.CorruptSketch` for a sum that is no sketch of valid records."""
    layout = split_layout(full, distinct, parts)
    split_key = sk.new_key()
    rec = Recovery(layout.n_fields, known)
    waited = peeled = 0.0
    sums = vector_bytes = 0
    failed: list[int] = []

    def one(part: int, lay: Layout, key: bytes, round_: int) -> IntArray:
        params = SketchParams(lay, key, Split(split_key, part, parts))
        fed.broadcast(Update(round=round_, union=params), step=step)
        return fed.sum(Phase.UNION_SKETCH, round_, lay.size, params.digest, step=step)

    arrived: queue.Queue[tuple[int, IntArray] | BaseException] = queue.Queue()
    stop = threading.Event()

    def first_pass() -> None:
        try:
            for part in range(parts):
                if stop.is_set():
                    return
                arrived.put((part, one(part, layout, split_key, first_round + part)))
        except BaseException as exc:  # handed to the peeling side, which raises it
            arrived.put(exc)

    def peel(part: int, vec: IntArray) -> int | None:
        """Peel and read one part into ``rec``; the part if it did not peel."""
        try:
            rec.add(layout, split_key, vec, in_place=True, part=True)
        except sk.PeelingFailed:
            return part
        return None

    t_start = time.perf_counter()
    worker = threading.Thread(target=first_pass, name="union-parts", daemon=True)
    worker.start()
    ready: deque[tuple[int, IntArray]] = deque()  # arrived, not peeled yet
    got = 0
    try:
        while got < parts:
            try:  # wait for a part only when there is none to peel
                item = arrived.get(block=not ready)
            except queue.Empty:
                part, vec = ready.popleft()  # parts still to come: peel one, here
                if peel(part, vec) is not None:
                    failed.append(part)
                del vec
                continue
            if isinstance(item, BaseException):
                raise item
            ready.append(item)
            got += 1
            sums += 1
            vector_bytes = max(vector_bytes, layout.nbytes)
            del item
        waited = time.perf_counter() - t_start  # the last part arrived
        # every part summed: the parts left peel PEEL_THREADS at once (numpy releases the GIL)
        with ThreadPoolExecutor(PEEL_THREADS, thread_name_prefix="union-peel") as pool:
            late = list(pool.map(lambda item: peel(*item), ready))
        ready.clear()
        failed = sorted([*failed, *(p for p in late if p is not None)])
        peeled = time.perf_counter() - t_start - waited
    finally:
        stop.set()
        worker.join()
    round_ = first_round + parts
    for part in failed:
        lay = layout
        for attempt in range(1, attempts):
            log.warning(
                "union: part %d of %d did not peel (attempt %d); retrying", part, parts, attempt
            )
            lay = lay.grown()
            key = sk.new_key()
            t0 = time.perf_counter()
            vec = one(part, lay, key, round_)
            t1 = time.perf_counter()
            waited += t1 - t0
            round_ += 1
            sums += 1
            vector_bytes = max(vector_bytes, lay.nbytes)
            try:
                rec.add(lay, key, vec, in_place=True, part=True)
            except sk.PeelingFailed:
                continue
            finally:
                del vec
                peeled += time.perf_counter() - t1
            break
        else:
            raise RunAborted(
                f"union: part {part} of the sketch did not peel in {attempts} attempts"
            )
    rec.check_classes(layout)
    t0 = time.perf_counter()
    records = rec.result()
    seconds = {"sums": waited, "peel": peeled, "merge": time.perf_counter() - t0}
    return SplitResult(records, sums, vector_bytes, seconds)
