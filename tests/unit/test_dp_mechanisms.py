"""The exact samplers of fedanon.dp.mechanisms, checked against their target distributions.

Every test uses a fixed seed, so it is deterministic; the thresholds (p > 1e-4, z < 5) would
be crossed by chance with probability < 1e-4 for a fresh seed, and the power checks show the
tests detect a wrong distribution.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from fedanon.dp.mechanisms import (
    bernoulli_exp,
    discrete_laplace,
    exponential_mechanism,
    exponential_mechanism_draws,
    uniform_below,
    uniform_below_n,
)
from fedanon.dp.randomness import NOT_PRIVATE, RandomSource
from fedanon.dp.utility import QUANTUM, Utility


def _laplace_pmf(k: np.ndarray, scale: float) -> np.ndarray:
    p = math.exp(-1 / scale)
    return (1 - p) / (1 + p) * np.power(p, np.abs(k))


def _laplace_var(scale: float) -> float:
    p = math.exp(-1 / scale)
    return 2 * p / (1 - p) ** 2


def _binned(draws: np.ndarray, width: int) -> np.ndarray:
    """Counts for (-inf, -width), -width .. width, (width, inf)."""
    c = np.clip(draws, -width - 1, width + 1) + width + 1
    return np.bincount(c, minlength=2 * width + 3)


def _binned_pmf(scale: float, width: int) -> np.ndarray:
    ks = np.arange(-width, width + 1)
    mid = _laplace_pmf(ks, scale)
    tail = (1 - mid.sum()) / 2
    return np.concatenate(([tail], mid, [tail]))


def test_uniform_below_is_uniform() -> None:
    src = RandomSource(1)
    for n in (2, 7, 10, 64, 1000):
        draws = uniform_below_n(src, n, 50_000 if n < 100 else 200_000)
        assert draws.min() >= 0 and draws.max() < n
        if n <= 64:
            counts = np.bincount(draws, minlength=n)
            assert stats.chisquare(counts).pvalue > 1e-4, n
    bounds = np.array([3, 5, 7] * 20_000)
    draws = uniform_below(src, bounds)
    assert (draws < bounds).all() and (draws >= 0).all()
    for b in (3, 5, 7):
        assert stats.chisquare(np.bincount(draws[bounds == b], minlength=b)).pvalue > 1e-4


def test_uniform_below_rejects_the_biased_words() -> None:
    # n = 3 * 2**60: 2**64 mod n = 2**60; plain "word % n" would give [0, 2**60) the
    # probability 6/16 = 0.375 instead of 1/3.
    src = RandomSource(2)
    n = 3 * (1 << 60)
    for draws in (uniform_below_n(src, n, 60_000), uniform_below(src, np.full(60_000, n))):
        assert draws.min() >= 0 and draws.max() < n
        low = np.count_nonzero(draws < (1 << 60))
        assert abs(low / draws.size - 1 / 3) < 0.01


def test_bernoulli_exp_frequencies() -> None:
    src = RandomSource(3)
    n = 100_000
    for num, den in ((0, 1), (1, 3), (1, 1), (3, 2), (7, 2), (25, 4)):
        p = math.exp(-num / den)
        hits = int(bernoulli_exp(src, np.full(n, num, dtype=np.int64), den).sum())
        z = (hits - n * p) / math.sqrt(n * p * (1 - p)) if 0 < p < 1 else hits - n * p
        assert abs(z) < 5, (num, den, hits / n, p)


@pytest.mark.parametrize("scale", [Fraction(2), Fraction(8), Fraction(20), Fraction(7, 3)])
def test_discrete_laplace_pmf(scale: Fraction) -> None:
    draws = discrete_laplace(RandomSource(4), scale, 200_000)
    width = int(3 * scale)
    counts = _binned(draws, width)
    expected = _binned_pmf(float(scale), width) * draws.size
    assert stats.chisquare(counts, expected).pvalue > 1e-4


@pytest.mark.parametrize("scale", [Fraction(2), Fraction(8), Fraction(20)])
def test_discrete_laplace_variance_and_tails(scale: Fraction) -> None:
    b = float(scale)
    draws = discrete_laplace(RandomSource(5), scale, 400_000)
    var = _laplace_var(b)
    # the sample variance of 400k draws has a relative std of about sqrt(5/400k) ~ 0.4 %
    assert abs(draws.var() / var - 1) < 0.03
    assert abs(draws.mean()) < 5 * math.sqrt(var / draws.size)
    p = math.exp(-1 / b)
    for k in (int(2 * b), int(4 * b), int(6 * b)):
        tail = 2 * p**k / (1 + p)  # P(|X| >= k)
        seen = np.count_nonzero(np.abs(draws) >= k)
        assert abs(seen - tail * draws.size) < 5 * math.sqrt(tail * draws.size) + 1, k


def test_the_laplace_test_detects_a_wrong_scale() -> None:
    draws = discrete_laplace(RandomSource(6), Fraction(2), 200_000)
    counts = _binned(draws, 6)
    wrong = _binned_pmf(2.2, 6) * draws.size
    assert stats.chisquare(counts, wrong).pvalue < 1e-10


def test_discrete_laplace_matches_opendp() -> None:
    """Two-sample test against OpenDP's vetted discrete Laplace (make_laplace on integers)."""
    dp = pytest.importorskip("opendp.prelude")
    dp.enable_features("contrib")
    n = 40_000
    meas = dp.m.make_laplace(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l1_distance(T=int), scale=2.0
    )
    theirs = np.asarray(meas([0] * n), dtype=np.int64)
    ours = discrete_laplace(RandomSource(7), Fraction(2), n)
    table = np.vstack((_binned(ours, 6), _binned(theirs, 6)))
    assert stats.chi2_contingency(table).pvalue > 1e-4


def _em_frequencies(u: np.ndarray, eps: Fraction, sens: int, n: int, seed: int) -> np.ndarray:
    src = RandomSource(seed)
    picks = exponential_mechanism_draws(src, u, eps, sens, n)
    single = [exponential_mechanism(src, u, eps, sens) for _ in range(500)]  # the run's path
    return np.bincount(np.concatenate((picks, single)), minlength=u.size)


def test_exponential_mechanism_frequencies() -> None:
    u = np.array([0, 1, 2, 5, 5, 9], dtype=np.int64)
    eps, sens = Fraction(1, 2), 1
    counts = _em_frequencies(u, eps, sens, 30_000, 8)
    w = np.exp(float(eps) * u / (2 * sens))
    assert stats.chisquare(counts, w / w.sum() * counts.sum()).pvalue > 1e-4
    # power: the same draws reject a mechanism without the factor 2 in the exponent
    w2 = np.exp(float(eps) * u / sens)
    assert stats.chisquare(counts, w2 / w2.sum() * counts.sum()).pvalue < 1e-10


def test_exponential_mechanism_with_the_budget_of_a_run() -> None:
    # eps' = 1 / 52 (Adult, epsilon = 1, h = 10), Max utilities (sensitivity 1)
    u = np.array([34015, 34015, 34100, 34200, 33900], dtype=np.int64)
    eps = Fraction(1, 52)
    counts = _em_frequencies(u, eps, 1, 20_000, 9)
    w = np.exp(float(eps) * (u - u.max()) / 2)
    assert stats.chisquare(counts, w / w.sum() * counts.sum()).pvalue > 1e-4


def test_exponential_mechanism_infogain_quantized() -> None:
    util = Utility("infogain", 2)
    gains = np.array([0.0, 0.1, 0.5, 1.0])
    u = np.floor(gains * QUANTUM).astype(np.int64)
    eps = Fraction(8)
    counts = _em_frequencies(u, eps, util.sensitivity, 20_000, 10)
    w = np.exp(float(eps) * u / (2 * util.sensitivity))
    assert stats.chisquare(counts, w / w.sum() * counts.sum()).pvalue > 1e-4
    # = the seed's exp(eps * InfoGain / (2 log2 |classes|)) up to 2**-20 in the exponent
    seed_w = np.exp(float(eps) * gains / 2)
    assert np.allclose(w / w.sum(), seed_w / seed_w.sum(), rtol=1e-5)


def test_exponential_mechanism_large_candidate_set() -> None:
    src = RandomSource(11)
    u = np.zeros(65_535, dtype=np.int64)
    u[1234] = 5000  # overwhelming: exp(-5000 / 104) relative weight for the others
    assert exponential_mechanism(src, u, Fraction(1, 52), 1) == 1234
    assert exponential_mechanism(src, np.array([3]), Fraction(1), 1) == 0


def test_randomness_sources() -> None:
    a, b = RandomSource(5), RandomSource(5)
    assert np.array_equal(a.words(10), b.words(10))
    assert not a.private and NOT_PRIVATE in a.describe()
    c, d = RandomSource(), RandomSource()
    assert c.private and "urandom" in c.describe()
    assert not np.array_equal(c.words(4), d.words(4))
    with pytest.raises(ValueError):
        RandomSource(-1)


def test_seed_example_scores() -> None:
    """Example 2 of the seed: Table 1 (8 records), specialization Anysex -> {Male, Female}:
    InfoGain = 0 and Max = 2 + 2 = 4."""
    child_class = np.array([[2, 2], [2, 2]], dtype=np.int64)  # Male: 2Y 2N, Female: 2Y 2N
    assert Utility("max", 2).of_children(child_class) == (4, 4.0)
    assert Utility("infogain", 2).of_children(child_class) == (0, 0.0)


def test_split_scores_match_brute_force() -> None:
    rng = np.random.default_rng(12)
    hist = rng.integers(0, 9, size=(9, 3)).astype(np.int64)
    hist[4] = 0
    for score in ("max", "infogain"):
        util = Utility(score, 3)
        ints, raw = util.of_splits(hist)
        assert ints.size == hist.shape[0] - 1
        for s in range(1, hist.shape[0]):
            pair = np.vstack((hist[:s].sum(axis=0), hist[s:].sum(axis=0)))
            i, r = util.of_children(pair)
            assert ints[s - 1] == i and math.isclose(raw[s - 1], r, abs_tol=1e-12)
