"""RecordSet.distinct with many high-cardinality columns (their combinations overflow one
int64 key): the same distinct records and multiplicities as a set of the rows."""

from __future__ import annotations

import random
from collections import Counter

from fedanon.union.records import encode_records


def test_distinct_when_the_combinations_overflow_a_key() -> None:
    rng = random.Random(5)
    n = 4000
    base = [[f"{rng.randrange(3000)}" for _ in range(9)] for _ in range(n // 2)]
    rows = base + [rng.choice(base) for _ in range(n - len(base))]  # repeats
    groups = [hash(tuple(r[:1])) % 7 for r in rows]
    columns = [[r[f] for r in rows] for f in range(9)]  # 3000^9 > 2^62 combinations
    rs = encode_records(groups, columns)
    first, mult = rs.distinct()
    want = Counter(zip(groups, *columns, strict=True))
    got = {(groups[i], *(c[i] for c in columns)): int(m) for i, m in zip(first, mult, strict=True)}
    assert got == dict(want)
    assert int(mult.sum()) == n and first.size == len(want)
