"""InfoGain (Sec. 3.2, Eq. 2-3): the information about the class gained by specializing v,
from the children x classes counts of T[v]; numeric split points maximize it over a
bins x classes histogram."""

from __future__ import annotations

from fedanon.scores.classwise import ClassHistogramScore
from fedanon.tds.measures import best_split_infogain, info_gain


class InfoGain(ClassHistogramScore):
    name = "infogain"
    child_score = info_gain
    split_at = best_split_infogain
    CHAIN_PROVEN = True  # several specializations per round (with LKC; tds.ports)
