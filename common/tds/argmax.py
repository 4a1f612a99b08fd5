"""The default selector of the engine: the argmax of the utility score (TDS, Algorithm 1/2).

The score (:class:`fedanon.tds.ports.UtilityScore`) keeps every candidate's score in a
:class:`~fedanon.tds.ports.ScoreBook`; the selector takes the highest (ties: attribute order
in the spec, then value order) and, for a numeric interval, the score's best split point.

Where the rule is proven for the model and the score (``chains``: README, "Several
specializations in one round"; :mod:`fedanon.tds.chain`) it takes, after the best, every
candidate the one-per-round algorithm provably takes next, and checks that claim on the
next round's statistics (:func:`~fedanon.tds.chain.check_chain`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial

from fedanon.arrays import IntArray
from fedanon.tds.blocks import BlockStore
from fedanon.tds.chain import Key, chain_after, check_chain, rank_key
from fedanon.tds.counts import CountsView
from fedanon.tds.ports import Candidate, ScoreBook, UtilityScore
from fedanon.tds.state import Applied, SharedState, SplitEntry, Update


class ArgmaxSelector:
    """The :class:`~fedanon.tds.ports.Selector` of a deterministic run."""

    def __init__(self, scorer: UtilityScore, m: int, chains: bool = False) -> None:
        self.scorer = scorer
        self.book = ScoreBook(m)
        self.chains = chains
        self.class_counts: dict[Candidate, IntArray] = {}  # children x classes of T[v]
        self._chain: list[Candidate] = []  # the last round's specializations, in order

    def split_point(self, state: SharedState, entry: SplitEntry, cells: IntArray) -> int | None:
        n_parts = len(entry.parts)
        return self.scorer.best_split(cells, entry.n_bins, n_parts, state.n_class)

    def observe(self, view: CountsView, store: BlockStore) -> None:
        self.scorer.on_counts(view, self.book, store)
        if self.chains:  # the children x classes counts of T[v]: the rule's bounds
            for ce in view.layout.classes:
                self.class_counts[(ce.attr, ce.node)] = view.class_counts(ce).copy()

    def select(
        self,
        state: SharedState,
        candidates: Sequence[Candidate],
        found: Sequence[set[Candidate]],
        several: bool = True,
    ) -> list[Candidate]:
        key = partial(self._key, state)
        if len(self._chain) > 1:
            check_chain(self._chain, found, state, key)
        if not candidates:
            self._chain = []
            return []
        best = min(candidates, key=lambda v: key(*v))
        picked = [best]
        if self.chains and several:
            ranking = sorted(candidates, key=lambda v: key(*v))
            picked = chain_after(best, ranking, state, self.class_counts, key)
        self._chain = picked
        return picked

    def score(self, a: int, x: int) -> float:
        return self.book.get(a, x)

    def applied(
        self, state: SharedState, update: Update, applied: Applied | None, store: BlockStore
    ) -> None:
        for v in update.invalid:
            self.class_counts.pop(v, None)
        if applied is not None:
            self.scorer.on_specialized(state, applied, self.book, store)
            if update.best is not None:
                self.class_counts.pop(update.best, None)

    def _key(self, st: SharedState, a: int, x: int, score: float | None = None) -> Key:
        """Sort key of candidate (a, x): highest score first; ties: attribute order in the
        spec, then value order (``score``: instead of the book's)."""
        s = self.book.get(a, x) if score is None else score
        return rank_key(s, a, st.trees[a].order_key(x), x)
