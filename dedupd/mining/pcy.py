"""PCY, Multistage and Multihash: hash pairs into buckets while counting items, prune pairs by bitmap.

Course material ``seeds/000`` ("PCY (Park-Chen-Yu) Algorithm", "Refinement: Multistage",
"Refinement: Multihash", "Main-Memory Details"):

- **PCY**: pass 1 counts items and, for every pair of every basket, increments the bucket
  ``h(i, j)`` (counts capped at s: "we do not need to count a bucket past s"); the counts become a
  bitmap (bit = bucket count >= s, 1/32 of the memory). Pass 2 counts, as triples, only the pairs
  of two frequent items that hash to a frequent bucket. A frequent pair always lands in a frequent
  bucket, so nothing is missed.
- **Multistage**: between them, an extra pass rehashes with an independent function only the
  pairs that PCY's pass 2 would count, into a second table (31/32 of the first, as the bitmap now
  takes room); the counting pass requires both bits.
- **Multihash**: pass 1 fills several smaller tables with independent hashes at once; pass 2
  requires a frequent bucket in every table.

Passes for k >= 3 are A-Priori's (the comparison table: "Same as Apriori, except for pairs").
Hash functions are multiply-shift on the pair key ``i * n + j`` with distinct odd 64-bit
multipliers (independent enough for pruning; correctness never depends on them).

Worked example (the seed's baskets, support 2, 4 buckets): the ten pairs fall into 4 buckets, so
most buckets are frequent and PCY prunes little; with 1,024 buckets every infrequent pair such as
{Bread, Coke} (count 1) that does not share a bucket with a frequent one is never counted.

    >>> from dedupd.mining.baskets import Baskets
    >>> b = Baskets.from_lists([["Bread", "Coke", "Milk"], ["Beer", "Bread"], ["Beer", "Coke", "Diaper", "Milk"],
    ...                         ["Beer", "Bread", "Diaper", "Milk"], ["Coke", "Diaper", "Milk"]])
    >>> pcy(b, 2, buckets=1024).counts_by_names()[frozenset({"Milk", "Coke"})]
    3
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.mining.apriori import Frequent, Layout, higher_levels, pass_items, to_original
from dedupd.mining.baskets import Baskets
from dedupd.mining.counting import extend, pairs_triples, row_end
from dedupd.mining.result import MiningResult, PassReport, Progress

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
Admit = Callable[[I64], npt.NDArray[np.bool_]]

_MULTIPLIERS = (
    0x9E3779B97F4A7C15,
    0xC2B2AE3D27D4EB4F,
    0x165667B19E3779F9,
    0xD6E8FEB86659FD93,
    0xFF51AFD7ED558CCD,
    0xC4CEB9FE1A85EC53,
)
DEFAULT_BUCKETS = 1 << 20


def bucket_bits(buckets: int) -> int:
    """log2 of the bucket count, which is rounded down to a power of two (at least 2 buckets)."""
    if buckets < 2:
        raise ConfigError(
            f"a hash table needs at least 2 buckets; got {buckets} (raise --memory or --buckets)"
        )
    return int(buckets).bit_length() - 1


def bucket_of(keys: I64, table: int, bits: int) -> I64:
    """Bucket of each pair key in hash table number ``table`` (multiply-shift hashing)."""
    mult = np.uint64(_MULTIPLIERS[table % len(_MULTIPLIERS)])
    return ((keys.astype(np.uint64) * mult) >> np.uint64(64 - bits)).astype(np.int64)


def bit_set(bitmap: U8, bucket: I64) -> npt.NDArray[np.bool_]:
    """Test bits of a ``np.packbits`` bitmap (big-endian bit order)."""
    bits = (bitmap[bucket >> 3] >> (7 - (bucket & 7)).astype(np.uint8)) & 1
    is_set: npt.NDArray[np.bool_] = bits.astype(bool)
    return is_set


class Stage:
    """One hash table: its number (which hash function), size, and after its pass, its bitmap."""

    __slots__ = ("bitmap", "bits", "frequent_buckets", "table")

    def __init__(self, table: int, bits: int) -> None:
        self.table = table
        self.bits = bits
        self.bitmap: U8 | None = None
        self.frequent_buckets = 0

    def count(self, keys: I64, counts: I64, weights: npt.NDArray[np.float64] | None) -> None:
        b = bucket_of(keys, self.table, self.bits)
        if weights is None:
            counts += np.bincount(b, minlength=counts.shape[0])
        else:
            counts += np.bincount(b, weights=weights, minlength=counts.shape[0]).astype(np.int64)

    def finish(self, counts: I64, min_count: int) -> None:
        frequent = counts >= min_count
        self.frequent_buckets = int(frequent.sum())
        self.bitmap = np.packbits(frequent)

    def admits(self, keys: I64) -> npt.NDArray[np.bool_]:
        assert self.bitmap is not None
        return bit_set(self.bitmap, bucket_of(keys, self.table, self.bits))


def _orig_keys(prep: Frequent, n: int) -> Callable[[I64], I64]:
    m = prep.m
    freq = prep.freq.astype(np.int64)
    return lambda k: freq[k // m] * n + freq[k % m]


def _admit_all(prep: Frequent, n: int, stages: list[Stage]) -> Admit:
    to_orig = _orig_keys(prep, n)

    def admit(keys: I64) -> npt.NDArray[np.bool_]:
        orig = to_orig(keys)
        ok = np.ones(keys.shape[0], dtype=bool)
        for st in stages:
            live = np.flatnonzero(ok)
            ok[live] = st.admits(orig[live])
        return ok

    return admit


def hashed_pairs(
    name: str,
    baskets: Baskets,
    min_count: int,
    plan: list[list[int]],
    buckets: int,
    max_size: int | None,
    progress: Progress | None,
    layout: Layout = "auto",
) -> MiningResult:
    """The PCY family. ``plan[p]`` lists the bucket counts of the tables filled in hashing pass p:
    PCY ``[[B]]``, Multihash ``[[B/2, B/2]]``, Multistage ``[[B], [31B/32]]``."""
    reports: list[PassReport] = []

    def emit(r: PassReport) -> None:
        reports.append(r)
        if progress:
            progress(r)

    n = max(baskets.n_items, 1)
    t0 = time.perf_counter()
    # pass 1: items (counted while loading) and every pair of every basket into the first tables
    stages = [Stage(t, bucket_bits(b)) for t, b in enumerate(plan[0])]
    counts = [np.zeros(1 << st.bits, dtype=np.int64) for st in stages]
    rowend = row_end(baskets.indptr)
    pos = np.arange(baskets.nnz, dtype=np.int64)
    for _, first, second in extend(baskets.items, rowend, pos, baskets.items):
        keys = first.astype(np.int64) * n + second
        for st, c in zip(stages, counts, strict=True):
            st.count(keys, c, None)
    for st, c in zip(stages, counts, strict=True):
        st.finish(np.minimum(c, min_count), min_count)
    prep, _ = pass_items(baskets, min_count)
    emit(
        PassReport(
            1,
            "items + pair buckets",
            "item counts + bucket counts",
            4 * baskets.n_items + sum(4 * c.shape[0] for c in counts),
            baskets.n_items,
            prep.m,
            time.perf_counter() - t0,
            _bucket_detail(stages),
        )
    )
    levels: list[tuple[I32, I64]] = []
    if prep.m < 2 or (max_size is not None and max_size < 2):
        return MiningResult(
            baskets.vocab, baskets.n_baskets, min_count, to_original(prep, levels), name, reports
        )
    number = 2
    # extra hashing passes (Multistage): rehash only the pairs that survive the bitmaps so far
    for sizes in plan[1:]:
        t0 = time.perf_counter()
        admit = _admit_all(prep, n, stages)
        to_orig = _orig_keys(prep, n)
        new = [Stage(len(stages) + i, bucket_bits(b)) for i, b in enumerate(sizes)]
        new_counts = [np.zeros(1 << st.bits, dtype=np.int64) for st in new]
        ppos = np.arange(prep.items.shape[0], dtype=np.int64)
        for ext, first, second in extend(prep.items, prep.rowend, ppos, prep.items):
            keys = first.astype(np.int64) * prep.m + second
            ok = admit(keys)
            w = None if prep.wpos is None else prep.wpos[ext][ok]
            for st, c in zip(new, new_counts, strict=True):
                st.count(to_orig(keys[ok]), c, w)
        for st, c in zip(new, new_counts, strict=True):
            st.finish(np.minimum(c, min_count), min_count)
        bitmap_bytes = sum(st.bitmap.nbytes for st in stages if st.bitmap is not None)
        stages.extend(new)
        emit(
            PassReport(
                number,
                "rehash candidate pairs",
                "item table + bitmaps + bucket counts",
                4 * prep.m + bitmap_bytes + sum(4 * c.shape[0] for c in new_counts),
                prep.m,
                prep.m,
                time.perf_counter() - t0,
                _bucket_detail(new),
            )
        )
        number += 1
    # counting pass: triples for the pairs of frequent items in frequent buckets of every table
    t0 = time.perf_counter()
    keys, kc = pairs_triples(prep.items, prep.rowend, prep.m, _admit_all(prep, n, stages), prep.wpos)
    f = kc >= min_count
    pairs = np.stack([(keys[f] // prep.m), (keys[f] % prep.m)], axis=1).astype(np.int32)
    possible = prep.pair_occurrences()
    bitmap_bytes = sum(st.bitmap.nbytes for st in stages if st.bitmap is not None)
    emit(
        PassReport(
            number,
            "pairs",
            "triples + bitmaps",
            12 * keys.shape[0] + bitmap_bytes + 4 * prep.m,
            int(keys.shape[0]),
            int(pairs.shape[0]),
            time.perf_counter() - t0,
            f"{keys.shape[0]} candidate pairs counted (at most {min(possible, prep.m * (prep.m - 1) // 2)} "
            "pairs of frequent items could occur)",
        )
    )
    levels, more = higher_levels(prep, pairs, kc[f], min_count, max_size, number + 1, progress, layout)
    reports.extend(more)
    return MiningResult(baskets.vocab, baskets.n_baskets, min_count, to_original(prep, levels), name, reports)


def _bucket_detail(stages: list[Stage]) -> str:
    return ", ".join(
        f"table {st.table}: {st.frequent_buckets}/{1 << st.bits} buckets frequent" for st in stages
    )


def pcy(
    baskets: Baskets,
    min_count: int,
    max_size: int | None = None,
    progress: Progress | None = None,
    buckets: int = DEFAULT_BUCKETS,
    layout: Layout = "auto",
) -> MiningResult:
    """Frequent itemsets by PCY (one hash table in pass 1; ``buckets`` rounded down to a power of 2)."""
    return hashed_pairs("pcy", baskets, min_count, [[buckets]], buckets, max_size, progress, layout)


def multistage(
    baskets: Baskets,
    min_count: int,
    max_size: int | None = None,
    progress: Progress | None = None,
    buckets: int = DEFAULT_BUCKETS,
    stages: int = 2,
    layout: Layout = "auto",
) -> MiningResult:
    """Frequent itemsets by Multistage: ``stages`` hashing passes (the later ones 31/32 the size)."""
    if stages < 1:
        raise ConfigError(f"multistage needs at least one hashing stage; got {stages}")
    plan = [[buckets]] + [[max(2, buckets * 31 // 32)]] * (stages - 1)
    return hashed_pairs("multistage", baskets, min_count, plan, buckets, max_size, progress, layout)


def multihash(
    baskets: Baskets,
    min_count: int,
    max_size: int | None = None,
    progress: Progress | None = None,
    buckets: int = DEFAULT_BUCKETS,
    tables: int = 2,
    layout: Layout = "auto",
) -> MiningResult:
    """Frequent itemsets by Multihash: ``tables`` tables sharing ``buckets`` in pass 1."""
    if tables < 1:
        raise ConfigError(f"multihash needs at least one hash table; got {tables}")
    return hashed_pairs(
        "multihash",
        baskets,
        min_count,
        [[max(2, buckets // tables)] * tables],
        buckets,
        max_size,
        progress,
        layout,
    )
