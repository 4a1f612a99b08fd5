"""Exact samplers on integers: the exponential mechanism and the discrete Laplace distribution.

Nothing here uses floating point.  Every random decision is an exact Bernoulli trial with a
rational probability, made from uniform 64-bit words (:class:`RandomSource`):

* ``uniform_below(n)``: rejection of the words below ``2**64 mod n`` (exactly uniform);
* ``Bernoulli(exp(-p/q))``: Canonne, Kamath, Steinke, *The Discrete Gaussian for Differential
  Privacy* (NeurIPS 2020), Algorithm 1;
* discrete Laplace ``P(x) ~ exp(-|x| / scale)`` for a rational scale: the same paper,
  Algorithm 2 (the noise OpenDP's ``make_laplace`` draws for integer data);
* exponential mechanism ``P(i) ~ exp(eps * u_i / (2 * sensitivity))`` for integer utilities
  and rational ``eps``: propose ``i`` uniformly, accept with probability
  ``exp(-eps * (max(u) - u_i) / (2 * sensitivity))`` -- an exact rejection sampler of exactly
  that distribution (Gumbel report-noisy-max draws the same distribution, with floats).

All samplers are vectorised over numpy arrays (loops run over rounds of rejection, never
over elements).  Integer arguments are checked to stay below 2**62 so that numpy int64 /
uint64 arithmetic cannot overflow.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from common.dp.randomness import RandomSource
from common.errors import InternalError

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
LIMIT = 1 << 62  # every numerator and denominator used in int64 arithmetic stays below this


def _checked(values: IntArray, what: str) -> IntArray:
    if values.size and (int(values.min()) < 0 or int(values.max()) >= LIMIT):
        raise InternalError(f"{what} outside [0, 2**62): exact sampling would overflow")
    return values


def uniform_below(src: RandomSource, bound: IntArray) -> IntArray:
    """One uniform integer in ``[0, bound[i])`` per element (``bound >= 1``)."""
    b = _checked(np.asarray(bound, dtype=np.int64), "bound").astype(np.uint64)
    if b.size and int(b.min()) < 1:
        raise InternalError("uniform_below needs bounds >= 1")
    out = np.zeros(b.size, dtype=np.uint64)
    threshold = (~b + np.uint64(1)) % b  # 2**64 mod b: words below it are rejected
    todo = np.arange(b.size)
    while todo.size:
        u = src.words(todo.size)
        ok = u >= threshold[todo]
        out[todo[ok]] = u[ok] % b[todo[ok]]
        todo = todo[~ok]
    return out.astype(np.int64)


def bernoulli(src: RandomSource, num: IntArray, den: IntArray) -> BoolArray:
    """Bernoulli(num / den) per element (``0 <= num <= den``, ``den >= 1``)."""
    num = np.asarray(num, dtype=np.int64)
    return np.asarray(uniform_below(src, np.asarray(den, dtype=np.int64)) < num, dtype=bool)


def _bernoulli_exp_le1(src: RandomSource, num: IntArray, den: IntArray) -> BoolArray:
    """Bernoulli(exp(-num/den)) for ``0 <= num <= den`` (CKS Algorithm 1, gamma <= 1):
    K = 1; while Bernoulli(gamma / K): K += 1; return K odd."""
    k = np.ones(num.size, dtype=np.int64)
    live = np.arange(num.size)
    while live.size:
        # Bernoulli(num / (den * K)) = Bernoulli(num / den) AND Bernoulli(1 / K)
        a = bernoulli(src, num[live], den[live]) & (uniform_below(src, k[live]) == 0)
        live = live[a]
        k[live] += 1
    return np.asarray(k % 2 == 1, dtype=bool)


def bernoulli_exp(src: RandomSource, num: IntArray, den: IntArray) -> BoolArray:
    """Bernoulli(exp(-num/den)) per element, for any rational ``num/den >= 0``."""
    num = _checked(np.asarray(num, dtype=np.int64), "numerator")
    den = _checked(np.asarray(den, dtype=np.int64), "denominator")
    whole, frac = num // den, num % den
    out = np.ones(num.size, dtype=bool)
    one = np.ones(num.size, dtype=np.int64)
    live = np.flatnonzero(whole > 0)
    step = 0
    while live.size:  # exp(-gamma) = exp(-1)^floor(gamma) * exp(-frac(gamma))
        ok = _bernoulli_exp_le1(src, one[live], one[live])
        out[live[~ok]] = False
        step += 1
        live = live[ok]
        live = live[whole[live] > step]
    rest = np.flatnonzero(out & (frac > 0))
    if rest.size:
        out[rest] = _bernoulli_exp_le1(src, frac[rest], den[rest])
    return out


def discrete_laplace(src: RandomSource, scale: Fraction, size: int) -> IntArray:
    """``size`` draws of the discrete Laplace distribution P(x) ~ exp(-|x| / scale), x in Z
    (CKS Algorithm 2 with scale = t / s)."""
    if scale <= 0:
        raise InternalError("the Laplace scale must be positive")
    t, s = scale.numerator, scale.denominator
    if t >= LIMIT // 64 or s >= LIMIT:
        raise InternalError("Laplace scale has too large a numerator or denominator")
    out = np.zeros(size, dtype=np.int64)
    todo = np.arange(size)
    while todo.size:
        n = todo.size
        tt = np.full(n, t, dtype=np.int64)
        u = uniform_below(src, tt)
        d = bernoulli_exp(src, u, tt)
        # V = number of successes of Bernoulli(exp(-1)) before the first failure
        v = np.zeros(n, dtype=np.int64)
        live = np.flatnonzero(d)
        one = np.ones(n, dtype=np.int64)
        while live.size:
            a = _bernoulli_exp_le1(src, one[live], one[live])
            live = live[a]
            v[live] += 1
        y = (u + t * v) // s
        neg = uniform_below(src, np.full(n, 2, dtype=np.int64)) == 1
        ok = d & ~(neg & (y == 0))
        out[todo[ok]] = np.where(neg, -y, y)[ok]
        todo = todo[~ok]
    return out


def exponential_mechanism(
    src: RandomSource, utility: IntArray, epsilon: Fraction, sensitivity: int
) -> int:
    """Index i with probability proportional to exp(epsilon * u_i / (2 * sensitivity)).

    ``epsilon``-DP when ``utility`` changes by at most ``sensitivity`` between neighbouring
    data sets.  Uniform proposals, each accepted with probability exp(-gamma_i),
    gamma_i = epsilon * (max u - u_i) / (2 * sensitivity); the first accepted proposal is
    returned.  The shift by max u does not change the distribution.
    """
    u = np.asarray(utility, dtype=np.int64)
    if u.ndim != 1 or u.size == 0:
        raise InternalError("the exponential mechanism needs at least one candidate")
    if epsilon <= 0 or sensitivity < 1:
        raise InternalError("the exponential mechanism needs epsilon > 0, sensitivity >= 1")
    gap = int(u.max()) - u
    if int(gap.max()) * epsilon.numerator >= LIMIT:
        raise InternalError("utility range too large for exact sampling")
    num = gap * epsilon.numerator
    den_value = 2 * sensitivity * epsilon.denominator
    if den_value >= LIMIT:
        raise InternalError("epsilon denominator too large for exact sampling")
    if u.size == 1:
        return 0
    batch = int(min(max(64, 2 * u.size), 1 << 17))
    den = np.full(batch, den_value, dtype=np.int64)
    while True:
        cand = uniform_below(src, np.full(batch, u.size, dtype=np.int64))
        hit = np.flatnonzero(bernoulli_exp(src, num[cand], den))
        if hit.size:
            return int(cand[hit[0]])
