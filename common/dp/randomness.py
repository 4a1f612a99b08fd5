"""Where the randomness of a DP run comes from: uniform 64-bit words.

By default the words come from the operating system's CSPRNG (``os.urandom``).  A fixed seed
gives a reproducible PCG64 stream instead: for tests and experiments only, the run is then
NOT differentially private (anyone who knows the seed can subtract the noise), and every
output of the run says so.
"""

from __future__ import annotations

import os

import numpy as np

from fedanon.arrays import U64Array

NOT_PRIVATE = "NOT PRIVATE: fixed seed"


class RandomSource:
    """Uniform 64-bit words; the samplers in :mod:`fedanon.dp.mechanisms` use nothing else."""

    def __init__(self, seed: int | None = None) -> None:
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be a non-negative integer, not {seed!r}")
        self.seed = seed
        self._pcg = None if seed is None else np.random.PCG64(seed)

    @property
    def private(self) -> bool:
        return self.seed is None

    def describe(self) -> str:
        if self.seed is None:
            return "os.urandom (operating-system CSPRNG)"
        return f"{NOT_PRIVATE} {self.seed} (PCG64 stream, for tests and experiments only)"

    def words(self, n: int) -> U64Array:
        """``n`` independent uniform 64-bit words."""
        if n <= 0:
            return np.zeros(0, dtype=np.uint64)
        if self._pcg is None:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return np.asarray(self._pcg.random_raw(n), dtype=np.uint64)
