"""The inner edges of a dynamic numeric QID's bins (fedanon.io.encoders.bin_edges): each the
float nearest the decimal edge min + i*step that the labels show (fedanon.model.tree.bin_edge),
computed without a Python loop when the decimals fit a double, edge by edge when they do not."""

from __future__ import annotations

import random

import numpy as np
import pytest

from fedanon.io.encoders import bin_edges
from fedanon.model.tree import bin_edge


def _reference(lo: float, step: float, n_bins: int) -> np.ndarray:
    return np.array([float(bin_edge(lo, step, i)) for i in range(1, n_bins)], dtype=np.float64)


def _cases() -> list[tuple[float, float, int]]:
    rng = random.Random(19)
    cases = [
        (0.0, 0.1, 10),  # 7 * 0.1 is the edge 0.7, not 0.7000000000000001
        (1.0, 0.1, 980),
        (1e9, 0.5, 2000),
        (0.0, 0.3333333333333333, 3),  # 16 decimals: more than a double's exact integers
        (-5.5, 0.25, 400),
        (10000.0, 10000.0, 149),
        (1e22, 1e21, 50),
        (0.001, 0.0007, 5000),
        (0.0, 1.0, 65_536),
    ]
    for _ in range(150):
        digits = rng.randint(0, 7)
        lo = round(rng.uniform(-1e7, 1e7), rng.randint(0, 5))
        step = round(rng.uniform(10**-digits, 500), digits) or 1.0
        cases.append((lo, step, rng.randint(2, 3000)))
    return cases


@pytest.mark.parametrize(("lo", "step", "n_bins"), _cases())
def test_edges_are_the_floats_nearest_the_decimal_edges(
    lo: float, step: float, n_bins: int
) -> None:
    bin_edges.cache_clear()
    got = bin_edges(lo, step, n_bins)
    assert got.dtype == np.float64 and not got.flags.writeable
    assert np.array_equal(got, _reference(lo, step, n_bins))


def test_a_cell_on_an_edge_falls_in_the_bin_the_edge_opens() -> None:
    edges = bin_edges(0.0, 0.1, 10)
    cells = np.array([0.0, 0.7, 0.6999999999999999, 0.3, 0.9, 0.95])
    assert np.searchsorted(edges, cells, side="right").tolist() == [0, 7, 6, 3, 9, 9]
