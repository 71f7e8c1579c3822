"""A memory budget picks among A-Priori, PCY, Multistage and Multihash, and each pass reports its bytes.

Course material ``seeds/000`` ("Main-Memory Bottleneck", "Counting Pairs in Memory", "PCY",
"Multistage", "Multihash", "Adding More Hash Functions"). The counting structures are sized as the
seed sizes them: 4 bytes per item count, per triangular-matrix cell and per bucket count, 12 bytes
per triple, 1 bit per bucket in a bitmap. The rule, after pass 1 has counted the items:

1. A-Priori if its pair structure fits: ``min(4 m (m-1) / 2, 12 * pairs that can occur)`` plus
   the frequent-item table (``4 m``).
2. Otherwise the budget minus the item counts becomes buckets (``B = (budget - 4 n) / 4``), and the
   average bucket count ``avg = pairs in all baskets / B`` decides how to hash:
   ``avg < s/2``: Multihash with two tables of B/2 (each still averages below s, so pruning holds,
   and it costs no extra pass); ``avg < s``: PCY; otherwise most buckets would be frequent, and
   Multistage adds a pass that rehashes only the surviving pairs.

Worked example: 1,000 frequent items need a 2 MB triangular matrix (499,500 cells of 4 bytes);
with a 1 MB budget and 5 million pair occurrences, B = 250,000 buckets average 20 pairs: with
s = 100 that is below s/2, so Multihash.

    >>> parse_bytes("64MiB"), parse_bytes("1.5GB"), parse_bytes("4096")
    (67108864, 1500000000, 4096)
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from dedupd.errors import ConfigError
from dedupd.mining.apriori import apriori, pass_items
from dedupd.mining.baskets import Baskets
from dedupd.mining.pcy import multihash, multistage, pcy
from dedupd.mining.result import MiningResult, Progress

_UNITS = {
    "": 1,
    "B": 1,
    "K": 10**3,
    "KB": 10**3,
    "KIB": 2**10,
    "M": 10**6,
    "MB": 10**6,
    "MIB": 2**20,
    "G": 10**9,
    "GB": 10**9,
    "GIB": 2**30,
    "T": 10**12,
    "TB": 10**12,
    "TIB": 2**40,
}


def parse_bytes(text: str | int) -> int:
    """``64MiB``, ``1.5GB``, ``500k`` or a plain number of bytes.

    Raises:
        ConfigError: for anything else.
    """
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    if not m or m.group(2).upper() not in _UNITS:
        raise ConfigError(
            f"memory must be a number of bytes with an optional unit (e.g. 64MiB, 1GB); got {text!r}"
        )
    return int(float(m.group(1)) * _UNITS[m.group(2).upper()])


@dataclass(frozen=True, slots=True)
class Plan:
    """Which algorithm a budget allows, with the numbers that decided it."""

    algorithm: str
    buckets: int
    reason: str


def plan(baskets: Baskets, min_count: int, budget: int) -> Plan:
    """Choose the algorithm for ``budget`` bytes of counting structures (see the module doc).

    Raises:
        ConfigError: when not even the item counts fit.
    """
    items_bytes = 4 * baskets.n_items
    if budget <= items_bytes:
        raise ConfigError(
            f"--memory {budget} is too small: the {baskets.n_items} item counts alone need "
            f"{items_bytes} bytes; give at least {items_bytes + 1024}"
        )
    prep, _ = pass_items(baskets, min_count)
    m = prep.m
    possible = m * (m - 1) // 2
    apriori_bytes = min(4 * possible, 12 * min(prep.pair_occurrences(), possible)) + 4 * m
    if apriori_bytes <= budget:
        return Plan("apriori", 0, f"A-Priori's pair counts need {apriori_bytes} B <= budget {budget} B")
    buckets = (budget - items_bytes) // 4
    lens = baskets.lengths()
    all_pairs = int((lens * (lens - 1) // 2).sum())
    avg = all_pairs / max(buckets, 1)
    why = (
        f"A-Priori's pair counts need {apriori_bytes} B > budget {budget} B; {buckets} buckets "
        f"average {avg:.1f} pairs (support {min_count})"
    )
    if avg < min_count / 2:
        return Plan("multihash", buckets, why + ": < s/2, two tables of B/2 still prune (Multihash)")
    if avg < min_count:
        return Plan("pcy", buckets, why + ": < s (PCY)")
    return Plan(
        "multistage", buckets, why + ": >= s, one table prunes little (Multistage adds a rehash pass)"
    )


def mine_within(
    baskets: Baskets,
    min_count: int,
    budget: int,
    max_size: int | None = None,
    progress: Progress | None = None,
) -> MiningResult:
    """Mine with the algorithm :func:`plan` picks; warns when a pass still exceeded the budget."""
    p = plan(baskets, min_count, budget)
    # passes k >= 3 count candidates in place (horizontal): bitmaps would not respect the budget
    if p.algorithm == "apriori":
        result = apriori(baskets, min_count, max_size, progress, layout="horizontal")
    elif p.algorithm == "pcy":
        result = pcy(baskets, min_count, max_size, progress, buckets=p.buckets, layout="horizontal")
    elif p.algorithm == "multihash":
        result = multihash(baskets, min_count, max_size, progress, buckets=p.buckets, layout="horizontal")
    else:
        result = multistage(baskets, min_count, max_size, progress, buckets=p.buckets, layout="horizontal")
    result.notes.append(f"--memory {budget}: {p.algorithm} ({p.reason})")
    over = [r for r in result.passes if r.nbytes > budget]
    if over:
        worst = max(over, key=lambda r: r.nbytes)
        result.warnings.append(
            f"pass {worst.number} ({worst.what}) needed {worst.nbytes} B of counting structures, over the "
            f"budget of {budget} B: raise --memory or the support"
        )
    return result


def peak_bytes(result: MiningResult) -> int:
    """The largest per-pass counting-structure size of a run."""
    return int(np.max([r.nbytes for r in result.passes])) if result.passes else 0
