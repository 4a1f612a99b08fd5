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

from fedanon.arrays import BoolArray, IntArray
from fedanon.dp.randomness import RandomSource
from fedanon.errors import InternalError

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


def uniform_below_n(src: RandomSource, n: int, size: int) -> IntArray:
    """``size`` uniform integers in ``[0, n)`` (one bound for all: faster)."""
    if not 1 <= n < LIMIT:
        raise InternalError("uniform_below_n needs 1 <= n < 2**62")
    if n & (n - 1) == 0:  # a power of two: the low bits of a word are exactly uniform
        return np.asarray(src.words(size) & np.uint64(n - 1), dtype=np.int64)
    threshold = np.uint64((1 << 64) % n)
    out = np.zeros(size, dtype=np.uint64)
    todo = np.arange(size)
    while todo.size:
        u = src.words(todo.size)
        ok = u >= threshold
        out[todo[ok]] = u[ok] % np.uint64(n)
        todo = todo[~ok]
    return out.astype(np.int64)


def bernoulli(src: RandomSource, num: IntArray, den: int) -> BoolArray:
    """Bernoulli(num[i] / den) per element (``0 <= num <= den``)."""
    num = np.asarray(num, dtype=np.int64)
    return np.asarray(uniform_below_n(src, den, num.size) < num, dtype=bool)


def _bernoulli_exp_le1(src: RandomSource, num: IntArray, den: int) -> BoolArray:
    """Bernoulli(exp(-num/den)) for ``0 <= num <= den`` (CKS Algorithm 1, gamma <= 1):
    K = 1; while Bernoulli(gamma / K): K += 1; return K odd."""
    k = np.ones(num.size, dtype=np.int64)
    live = np.arange(num.size)
    while live.size:
        # Bernoulli(num / (den * K)) = Bernoulli(num / den) AND Bernoulli(1 / K)
        a = bernoulli(src, num[live], den)
        if (k[live] > 1).any():
            a &= uniform_below(src, k[live]) == 0
        live = live[a]
        k[live] += 1
    return np.asarray(k % 2 == 1, dtype=bool)


def bernoulli_exp_minus_one(src: RandomSource, size: int) -> BoolArray:
    """Bernoulli(exp(-1)) per element."""
    return _bernoulli_exp_le1(src, np.ones(size, dtype=np.int64), 1)


def bernoulli_exp(src: RandomSource, num: IntArray, den: int) -> BoolArray:
    """Bernoulli(exp(-num[i]/den)) per element, for any rational ``num/den >= 0``."""
    num = _checked(np.asarray(num, dtype=np.int64), "numerator")
    if not 1 <= den < LIMIT:
        raise InternalError("denominator outside [1, 2**62)")
    whole, frac = num // den, num % den
    out = np.ones(num.size, dtype=bool)
    live = np.flatnonzero(whole > 0)
    step = 0
    while live.size:  # exp(-gamma) = exp(-1)^floor(gamma) * exp(-frac(gamma))
        ok = bernoulli_exp_minus_one(src, live.size)
        out[live[~ok]] = False
        step += 1
        live = live[ok]
        live = live[whole[live] > step]
    rest = np.flatnonzero(out & (frac > 0))
    if rest.size:
        out[rest] = _bernoulli_exp_le1(src, frac[rest], den)
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
        u = uniform_below_n(src, t, n)
        d = bernoulli_exp(src, u, t)
        # V = number of successes of Bernoulli(exp(-1)) before the first failure
        v = np.zeros(n, dtype=np.int64)
        live = np.flatnonzero(d)
        while live.size:
            live = live[bernoulli_exp_minus_one(src, live.size)]
            v[live] += 1
        y = (u + t * v) // s
        neg = uniform_below_n(src, 2, n) == 1
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
    return int(exponential_mechanism_draws(src, utility, epsilon, sensitivity, 1)[0])


def exponential_mechanism_draws(
    src: RandomSource, utility: IntArray, epsilon: Fraction, sensitivity: int, size: int
) -> IntArray:
    """``size`` independent draws of :func:`exponential_mechanism` (each draw is the first
    accepted proposal of its own sequence; proposals are made in batches)."""
    u = np.asarray(utility, dtype=np.int64)
    if u.ndim != 1 or u.size == 0:
        raise InternalError("the exponential mechanism needs at least one candidate")
    if epsilon <= 0 or sensitivity < 1:
        raise InternalError("the exponential mechanism needs epsilon > 0, sensitivity >= 1")
    gap = int(u.max()) - u
    if int(gap.max()) * epsilon.numerator >= LIMIT:
        raise InternalError("utility range too large for exact sampling")
    num = gap * epsilon.numerator
    den = 2 * sensitivity * epsilon.denominator
    if den >= LIMIT:
        raise InternalError("epsilon denominator too large for exact sampling")
    out = np.zeros(size, dtype=np.int64)
    if u.size == 1:
        return out
    per = int(max(4, min(2 * u.size, (1 << 17) // max(size, 1))))
    todo = np.arange(size)
    while todo.size:
        cand = uniform_below_n(src, u.size, todo.size * per).reshape(todo.size, per)
        acc = bernoulli_exp(src, num[cand.reshape(-1)], den).reshape(todo.size, per)
        has = acc.any(axis=1)
        first = acc.argmax(axis=1)
        out[todo[has]] = cand[has, first[has]]
        todo = todo[~has]
    return out
