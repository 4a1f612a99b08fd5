"""Utility of a released RT-dataset, computed from the released text (Definitions 3-7).

* NCP (Defs 3-4): per released record the weighted NCP of its generalized demographics; a
  record left out of the release (suppressed with its group) counts the sum of the weights;
  NCP(D) divides by the input size.
* UL (Defs 5-6): per record sum of UL(u~) over its generalized codes / (2^sigma(r) - 1) + s(r),
  s(r) = its input codes missing from the release (needs the input aligned with the release);
  a left-out record counts all its codes.  UL(D) divides by the input size.
* ARE (Def 7): the mean relative error of COUNT queries.  The released count is the expected
  count when every generalized value is read uniformly: a numeric range [lo:hi] holds each of
  its integers with probability 1 / (hi - lo + 1); a hierarchy node each of its leaves with
  probability 1 / leaves; a generalized code (c1 ... cn) stands for a non-empty subset of its
  codes chosen uniformly, so it holds a given code with probability 2^(n-1) / (2^n - 1) and two
  given codes with 2^(n-2) / (2^n - 1); predicates on different attributes and different
  generalized codes are independent.  Workloads as in the seed's Section 5: W1 two
  demographics, W2 one demographic and one code, W3 two codes, values taken from random input
  records (so no query has a zero input count).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from fedanon.errors import DataError
from fedanon.kkm.schema import KkmSchema
from fedanon.kkm.spec import KkmSpec

_RANGE = re.compile(r"^\[(-?[0-9.eE+-]+):(-?[0-9.eE+-]+)\]$")


@dataclass(frozen=True)
class Parsed:
    """A released table read back: per record demographic cells and generalized codes."""

    demo: list[list[str]]  # per qid, per record
    tokens: list[list[tuple[str, ...]]]  # per record: its generalized codes


def parse_release(spec: KkmSpec, data: dict[str, list[str]]) -> Parsed:
    sep = spec.set_attr.separator
    seen_cells: dict[str, list[tuple[str, ...]]] = {}  # a cluster repeats its cells: share them
    seen_tokens: dict[str, tuple[str, ...]] = {}
    tokens = []
    for c in data[spec.set_attr.name]:
        toks = seen_cells.get(c)
        if toks is None:
            toks = []
            for t in c.split(sep) if c else []:
                tok = seen_tokens.get(t)
                if tok is None:
                    tok = seen_tokens[t] = tuple(_token(t))
                toks.append(tok)
            seen_cells[c] = toks
        tokens.append(toks)
    return Parsed([data[a.name] for a in spec.qids], tokens)


def _token(text: str) -> list[str]:
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        return text[1:-1].split()
    return [text]


def numeric_span(cell: str) -> tuple[float, float]:
    m = _RANGE.match(cell.strip())
    if m:
        return float(m.group(1)), float(m.group(2))
    try:
        v = float(cell)
    except ValueError:
        raise DataError(
            "not a released numeric value", value=cell, expected="v or [lo:hi]"
        ) from None
    return v, v


def record_ncp(
    schema: KkmSchema, parsed: Parsed, ranges: Sequence[tuple[float, float]]
) -> list[float]:
    """NCP(r) of every released record; ``ranges`` = (lo, hi) of each numeric qid's domain."""
    spec = schema.spec
    n = len(parsed.tokens)
    out = np.zeros(n)
    for a, w, col, (lo, hi) in zip(spec.qids, spec.weights, parsed.demo, ranges, strict=True):
        cache: dict[str, float] = {}
        if a.type == "numeric":
            size = hi - lo if hi > lo else 1.0
            for cell in set(col):
                x, y = numeric_span(cell)
                cache[cell] = (y - x) / size
        else:
            tree = schema.trees[a.name]
            for cell in set(col):
                node = tree.node_index.get(cell)
                if node is None:
                    raise DataError("not a node of the hierarchy", column=a.name, value=cell)
                leaves = int(tree.node_leaves[node])
                cache[cell] = leaves / tree.n_leaves if leaves > 1 else 0.0
        out += w * np.fromiter((cache[c] for c in col), dtype=np.float64, count=n)
    return [float(x) for x in out]


def record_ul(parsed: Parsed, original: Sequence[Sequence[str]] | None) -> list[float]:
    """UL(r) of every released record; ``original`` = the input codes of the same records."""
    out = []
    held: dict[int, frozenset[str]] = {}  # cells are shared lists (parse_release): by identity
    for i, toks in enumerate(parsed.tokens):
        sizes = [len(t) for t in toks]
        sigma = sum(sizes)
        num = sum((1 << a) - 1 for a in sizes if a >= 2)
        ul = num / ((1 << sigma) - 1) if num else 0.0
        if original is not None:
            kept = held.get(id(toks))
            if kept is None:
                kept = held[id(toks)] = frozenset(c for t in toks for c in t)
            ul += sum(1 for c in original[i] if c not in kept)
        out.append(ul)
    return out


@dataclass(frozen=True)
class Query:
    kind: str  # "W1" | "W2" | "W3"
    demo: tuple[tuple[int, str], ...]  # (qid index, value)
    codes: tuple[str, ...]


def workload(
    kind: str, n: int, seed: int, demo: Sequence[Sequence[str]], codes: Sequence[Sequence[str]]
) -> list[Query]:
    """``n`` queries of a workload, values from random input records (deterministic)."""
    rng = np.random.default_rng(seed)
    nq = len(demo)
    out: list[Query] = []
    tries = 0
    while len(out) < n and tries < 50 * n:
        tries += 1
        r = int(rng.integers(len(codes)))
        if kind == "W1":
            attrs = rng.choice(nq, size=min(2, nq), replace=False)
            out.append(Query(kind, tuple((int(a), demo[int(a)][r]) for a in sorted(attrs)), ()))
        elif kind == "W2":
            if not codes[r]:
                continue
            a = int(rng.integers(nq))
            c = codes[r][int(rng.integers(len(codes[r])))]
            out.append(Query(kind, ((a, demo[a][r]),), (c,)))
        else:
            if len(codes[r]) < 2:
                continue
            pick = rng.choice(len(codes[r]), size=2, replace=False)
            out.append(Query(kind, (), tuple(sorted(codes[r][int(j)] for j in pick))))
    return out


class QueryCounter:
    """Counts COUNT queries on the input (exactly) and on the release (expected), with
    inverted indexes so a query costs O(records) numpy work, not a Python loop per record."""

    def __init__(
        self,
        schema: KkmSchema,
        parsed: Parsed,
        demo: Sequence[Sequence[str]],
        codes: Sequence[Sequence[str]],
    ) -> None:
        self.schema = schema
        self.parsed = parsed
        self.demo = [np.asarray(col, dtype=object) for col in demo]
        self.n_in = len(codes)
        self.n_out = len(parsed.tokens)
        self.code_rows: dict[str, list[int]] = {}
        for r, cs in enumerate(codes):
            for c in cs:
                self.code_rows.setdefault(c, []).append(r)
        # released: distinct generalized codes, the rows holding each, and code -> tokens
        tok_id: dict[tuple[str, ...], int] = {}
        by_obj: dict[int, int] = {}  # tokens are interned (parse_release): skip re-hashing
        tok_rows: list[list[int]] = []
        for r, toks in enumerate(parsed.tokens):
            for t in toks:
                i = by_obj.get(id(t), -1)
                if i < 0:
                    i = by_obj[id(t)] = tok_id.setdefault(t, len(tok_id))
                if i == len(tok_rows):
                    tok_rows.append([])
                tok_rows[i].append(r)
        self.tok_rows = [np.asarray(x, dtype=np.int64) for x in tok_rows]
        self.tok_size = np.asarray([len(t) for t in tok_id], dtype=np.int64)
        self.code_toks: dict[str, list[int]] = {}
        for t, i in tok_id.items():
            for c in t:
                self.code_toks.setdefault(c, []).append(i)
        self.cells = []
        for col in parsed.demo:
            index: dict[str, int] = {}
            inv = np.fromiter(
                (index.setdefault(c, len(index)) for c in col), dtype=np.int64, count=len(col)
            )
            self.cells.append((list(index), inv))

    def original(self, q: Query) -> int:
        mask = np.ones(self.n_in, dtype=bool)
        for a, v in q.demo:
            mask &= self.demo[a] == v
        for c in q.codes:
            hit = np.zeros(self.n_in, dtype=bool)
            hit[self.code_rows.get(c, [])] = True
            mask &= hit
        return int(mask.sum())

    def released(self, q: Query) -> float:
        spec = self.schema.spec
        p = np.ones(self.n_out)
        for a, v in q.demo:
            attr = spec.qids[a]
            uniq, inv = self.cells[a]
            probs = np.asarray(
                [_demo_prob(self.schema, attr.name, attr.type == "numeric", u, v) for u in uniq]
            )
            p *= probs[inv]
        if q.codes:
            holder = []  # per query code: the generalized code holding it in each row, or -1
            for c in q.codes:
                h = np.full(self.n_out, -1, dtype=np.int64)
                for t in self.code_toks.get(c, []):
                    h[self.tok_rows[t]] = t
                holder.append(h)
            hit = np.all(np.stack(holder) >= 0, axis=0)
            pc = np.zeros(self.n_out)
            rows = np.flatnonzero(hit)
            if rows.size:
                held = np.stack([h[rows] for h in holder])  # (codes, rows)
                prob = np.ones(rows.size)
                for j in range(held.shape[0]):
                    first = np.all(held[:j] != held[j], axis=0) if j else np.ones(rows.size, bool)
                    hits = (held == held[j]).sum(axis=0)
                    size = self.tok_size[held[j]]
                    prob = np.where(first, prob * _subset_prob_v(size, hits), prob)
                pc[rows] = prob
            p *= pc
        return float(p.sum())


def _subset_prob_v(
    size: npt.NDArray[np.int64], hits: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """P(a uniform non-empty subset of ``size`` codes holds ``hits`` given codes)."""
    s = size.astype(np.float64)
    small = np.minimum(s, 60.0)
    exact = 2.0 ** (small - hits) / (2.0**small - 1.0)
    return np.where(s > 60, 2.0 ** (-hits.astype(np.float64)), exact)


def _demo_prob(schema: KkmSchema, name: str, numeric: bool, cell: str, value: str) -> float:
    if numeric:
        lo, hi = numeric_span(cell)
        v = float(value)
        if not lo <= v <= hi:
            return 0.0
        return 1.0 / (hi - lo + 1.0) if hi > lo else 1.0
    tree = schema.trees[name]
    node = tree.node_index.get(cell)
    leaf = tree.index.get(value)
    if node is None or leaf is None or leaf not in tree.leaves_under(node):
        return 0.0
    return 1.0 / float(tree.node_leaves[node])


def are(
    queries: Sequence[Query],
    schema: KkmSchema,
    parsed: Parsed,
    demo: Sequence[Sequence[str]],
    codes: Sequence[Sequence[str]],
) -> float:
    """Definition 7: mean |C_A - C_O| / C_O over the workload."""
    counter = QueryCounter(schema, parsed, demo, codes)
    errs = []
    for q in queries:
        co = counter.original(q)
        if co == 0:
            continue
        errs.append(abs(counter.released(q) - co) / co)
    return float(np.mean(errs)) if errs else 0.0
