"""Max (DiffGen's utility, Mohammed et al. 2011; the "max frequency" score): the sum over the
children c of v of the largest class count of T[c] -- the records that a majority-class guess
per child gets right.  Its sensitivity is 1, which is why DiffGen samples with it.

In a deterministic (LKC) run it is a utility score like InfoGain: T[v] is fixed while v is in
the cut, so each candidate is scored once from its children x classes counts, and numeric
split points maximize it over a bins x classes histogram.  Unlike InfoGain it is an absolute
count, not a gain: a value covering more records scores higher (Max(v) >= the majority count
of T[v]), which is the paper's choice for DiffGen and makes an LKC run favour the general
values first.
"""

from __future__ import annotations

from fedanon.scores.classwise import ClassHistogramScore
from fedanon.tds.measures import best_split_max, max_of_children


class Max(ClassHistogramScore):
    name = "max"
    child_score = max_of_children
    split_at = best_split_max
