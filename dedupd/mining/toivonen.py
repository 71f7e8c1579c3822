"""Toivonen's algorithm: a sample at a lowered threshold, one full pass, the negative border as proof.

Course material ``seeds/000`` ("Toivonen's Algorithm", "Key Idea", "Example"): mine a random sample
with a *lowered* threshold (the seed's example: 10% sample, 5% support -> 0.5% in the sample, i.e.
scaled, here further multiplied by ``lower``), then count the sample's frequent itemsets and
their negative border (not frequent in the sample, every immediate subset frequent) on all the
baskets. If no border itemset is frequent, the frequent sample itemsets that are frequent overall
are exactly the answer; otherwise something may have been missed and the algorithm starts again
with a new, larger sample. It never returns a wrong answer: after ``max_attempts`` failures it falls
back to A-Priori over all the baskets, and says so.

Worked example: if the sample finds {A}, {B} frequent but not {A, B}, the border holds {A, B} and
every item other than A and B. Should {A, B} prove frequent in all the baskets, its supersets may
be frequent too and were never counted: the attempt fails.

    >>> from dedupd.mining.baskets import Baskets
    >>> b = Baskets.from_lists([["a", "b"]] * 40 + [["a", "c"]] * 40 + [["b", "c"]] * 20)
    >>> r = toivonen(b, 30, seed=1)
    >>> sorted((sorted(s), c) for s, c in r.counts_by_names().items())
    [(['a'], 80), (['a', 'b'], 40), (['a', 'c'], 40), (['b'], 60), (['c'], 60)]
"""

from __future__ import annotations

import time

import numpy as np

from dedupd.errors import ConfigError
from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets
from dedupd.mining.result import MiningResult, PassReport, Progress
from dedupd.mining.sampling import MAX_CANDIDATES, draw_sample, mine_sample, sample_threshold, verify


def toivonen(
    baskets: Baskets,
    min_count: int,
    max_size: int | None = None,
    progress: Progress | None = None,
    fraction: float = 0.1,
    lower: float = 0.8,
    seed: int = 0,
    max_attempts: int = 5,
    growth: float = 1.5,
    max_candidates: int | None = MAX_CANDIDATES,
) -> MiningResult:
    """All frequent itemsets by Toivonen's algorithm (exact; reports the passes and attempts).

    Args:
        fraction: share of the baskets in the first sample.
        lower: the scaled sample threshold is multiplied by this (< 1: fewer failures, more counting).
        seed: random seed of the first sample (attempt i uses ``seed + i``).
        max_attempts: samples tried before falling back to A-Priori over all baskets.
        growth: each failed attempt multiplies the sample fraction by this (capped at 1).
        max_candidates: the most candidate itemsets a sample, and then its full pass, may count: at a
            lowered threshold of 1 every subset of every sampled basket is frequent in the sample.

    Raises:
        ConfigError: beyond ``max_candidates``, in one line that says what to change.
    """
    if not 0 < lower <= 1:
        raise ConfigError(f"the lowered-threshold factor must be in (0, 1]; got {lower}")
    if max_attempts < 1:
        raise ConfigError(f"max attempts must be at least 1; got {max_attempts}")
    reports: list[PassReport] = []

    def emit(r: PassReport) -> None:
        reports.append(r)
        if progress:
            progress(r)

    result = MiningResult(baskets.vocab, baskets.n_baskets, min_count, [], "toivonen", reports)
    number = 1
    for attempt in range(max_attempts):
        rng = np.random.default_rng(seed + attempt)
        t0 = time.perf_counter()
        sample = draw_sample(baskets, fraction, rng)
        thr = sample_threshold(min_count, sample.n_baskets, baskets.n_baskets, lower)
        found = mine_sample(sample, thr, min_count, max_size, max_candidates)
        sample_levels = [s for s, _ in found.levels]
        emit(
            PassReport(
                number,
                f"attempt {attempt + 1}: sample of {sample.n_baskets:,} baskets at threshold {thr}",
                "A-Priori in memory",
                max((p.nbytes for p in found.passes), default=0) + sample.nbytes(),
                found.n_itemsets,
                found.n_itemsets,
                time.perf_counter() - t0,
                f"lowered threshold {thr} (of {min_count})",
            )
        )
        t0 = time.perf_counter()
        levels, dropped, border_hits, counted = verify(
            baskets, sample_levels, min_count, max_size, max_candidates
        )
        emit(
            PassReport(
                number + 1,
                f"attempt {attempt + 1}: full pass",
                "candidate counts (sample + border)",
                0,
                counted,
                sum(s.shape[0] for s, _ in levels),
                time.perf_counter() - t0,
                f"{dropped} false positives dropped, {border_hits} negative-border itemsets frequent",
            )
        )
        number += 2
        if border_hits == 0:
            result.levels = levels
            return result
        result.notes.append(
            f"attempt {attempt + 1} failed: {border_hits} negative-border itemsets are frequent; "
            "retrying with a larger sample"
        )
        fraction = min(1.0, fraction * growth)
    t0 = time.perf_counter()
    exact = apriori(baskets, min_count, max_size)
    result.levels = exact.levels
    emit(
        PassReport(
            number,
            f"fallback: A-Priori over all baskets ({len(exact.passes)} passes)",
            "A-Priori",
            max((p.nbytes for p in exact.passes), default=0),
            exact.n_itemsets,
            exact.n_itemsets,
            time.perf_counter() - t0,
        )
    )
    result.notes.append(
        f"Toivonen failed {max_attempts} times; the result comes from A-Priori over all baskets"
    )
    return result
