"""Random sampling: A-Priori on a sample with a proportionally scaled threshold; misses are reported.

Course material ``seeds/000`` ("Random Sampling"): run an in-memory algorithm on a random sample
and "scale down support threshold proportionally"; "may miss some frequent itemsets (false
negatives)". The comparison table lists no false positives: here a verifying pass counts the
sample's frequent itemsets *and their negative border* on all the baskets, drops the false
positives, and tells whether anything was missed. By Toivonen's argument, if no itemset of the
negative border is frequent in the whole data then nothing was missed; otherwise the result is
marked incomplete and a warning names how many border itemsets proved frequent. Without the
verifying pass (``verify=False``) the counts are the sample's scaled up, and the result always
says it may hold false positives and miss itemsets. Nothing is ever silent.

Worked example: 1,000 baskets, 10% sample, support 50 -> sample threshold ``ceil(50 * 100 / 1000)
= 5``.

    >>> sample_threshold(50, 100, 1000, 1.0)
    5
"""

from __future__ import annotations

import math
import time

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.mining.apriori import CandidateLimitError, apriori, check_candidates
from dedupd.mining.baskets import Baskets
from dedupd.mining.candidates import negative_border
from dedupd.mining.counting import find_rows
from dedupd.mining.family import count_family, union_levels
from dedupd.mining.result import MiningResult, PassReport, Progress

I32 = npt.NDArray[np.int32]
I64 = npt.NDArray[np.int64]


MAX_CANDIDATES = 2_000_000  # candidate itemsets a sample and its verifying pass may count (--max-candidates)


def sample_threshold(min_count: int, sample_size: int, n: int, lower: float) -> int:
    """The support threshold scaled to the sample (and multiplied by ``lower`` <= 1)."""
    return max(1, math.ceil(lower * min_count * sample_size / max(n, 1) - 1e-9))


def draw_sample(baskets: Baskets, fraction: float, rng: np.random.Generator) -> Baskets:
    """A uniform sample of ``round(fraction * n)`` baskets (at least one), without replacement."""
    if not 0 < fraction <= 1:
        raise ConfigError(f"sample fraction must be in (0, 1]; got {fraction}")
    n = baskets.n_baskets
    size = min(n, max(1, round(fraction * n)))
    rows = np.sort(rng.choice(n, size=size, replace=False)).astype(np.int64)
    return baskets.take(rows)


def mine_sample(
    sample: Baskets, threshold: int, min_count: int, max_size: int | None, max_candidates: int | None
) -> MiningResult:
    """A-Priori on the sample at its lowered threshold, with the candidates bounded.

    Raises:
        ConfigError: one line saying how many candidates the sample would need, and what to change.
    """
    try:
        return apriori(sample, threshold, max_size, max_candidates=max_candidates)
    except CandidateLimitError as exc:
        raise ConfigError(
            f"the sample of {sample.n_baskets:,} baskets at its threshold of {threshold} (of {min_count}) has "
            f"more than {exc.limit:,} candidate itemsets ({exc.counted:,} up to size {exc.size}): use --max-size, "
            "or a higher --support or --sample-fraction (or raise --max-candidates)"
        ) from None


def verify(
    baskets: Baskets,
    sample_levels: list[I32],
    min_count: int,
    max_size: int | None,
    max_candidates: int | None = None,
) -> tuple[list[tuple[I32, I64]], int, int, int]:
    """Count the sample's frequent itemsets and their negative border on all baskets.

    Returns:
        ``(levels of the truly frequent itemsets, false positives dropped, frequent border itemsets,
        itemsets counted)``; the third is 0 exactly when no frequent itemset can have been missed.

    Raises:
        ConfigError: when more than ``max_candidates`` itemsets would be counted.
    """
    border = negative_border(sample_levels, baskets.n_items, max_size)
    counted = sum(s.shape[0] for s in sample_levels) + sum(b.shape[0] for b in border)
    try:
        check_candidates(counted, len(border), max_candidates)
    except CandidateLimitError as exc:
        raise ConfigError(
            f"the sample's itemsets and their negative border are {counted:,} itemsets to count, more "
            f"than {exc.limit:,}: use --max-size, or a higher --support or --sample-fraction (or raise "
            "--max-candidates)"
        ) from None
    family = union_levels([sample_levels, border])
    counts = count_family(baskets, family)
    levels: list[tuple[I32, I64]] = []
    dropped = 0
    border_hits = 0
    for k, (sets, c) in enumerate(zip(family, counts, strict=True)):
        frequent = c >= min_count
        levels.append((sets[frequent], c[frequent]))
        in_sample = np.zeros(sets.shape[0], dtype=bool)
        if k < len(sample_levels) and sample_levels[k].shape[0]:
            in_sample = find_rows(sample_levels[k], sets) >= 0
        dropped += int((in_sample & ~frequent).sum())
        border_hits += int((~in_sample & frequent).sum())
    while levels and levels[-1][0].shape[0] == 0:
        levels.pop()
    return levels, dropped, border_hits, counted


def random_sampling(
    baskets: Baskets,
    min_count: int,
    max_size: int | None = None,
    progress: Progress | None = None,
    fraction: float = 0.1,
    seed: int = 0,
    lower: float = 1.0,
    verify_pass: bool = True,
    max_candidates: int | None = MAX_CANDIDATES,
) -> MiningResult:
    """Frequent itemsets from a random sample (may miss some; the result says so).

    Args:
        fraction: share of the baskets in the sample.
        seed: random seed of the sample.
        lower: multiply the scaled threshold by this (< 1 misses less, counts more).
        verify_pass: count the sample's itemsets and their negative border on all baskets.
        max_candidates: the most candidate itemsets the sample, and then the verifying pass, may count.

    Raises:
        ConfigError: beyond ``max_candidates``, in one line that says what to change.
    """
    reports: list[PassReport] = []
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    sample = draw_sample(baskets, fraction, rng)
    thr = sample_threshold(min_count, sample.n_baskets, baskets.n_baskets, lower)
    found = mine_sample(sample, thr, min_count, max_size, max_candidates)
    sample_levels = [s for s, _ in found.levels]
    rep = PassReport(
        1,
        f"sample of {sample.n_baskets:,} baskets at threshold {thr}",
        "A-Priori in memory",
        max((p.nbytes for p in found.passes), default=0) + sample.nbytes(),
        found.n_itemsets,
        found.n_itemsets,
        time.perf_counter() - t0,
        f"sample threshold {thr} (of {min_count})",
    )
    reports.append(rep)
    if progress:
        progress(rep)
    result = MiningResult(baskets.vocab, baskets.n_baskets, min_count, [], "sample", reports)
    if not verify_pass:
        scale = baskets.n_baskets / max(sample.n_baskets, 1)
        result.levels = [(s, np.rint(c * scale).astype(np.int64)) for s, c in found.levels]
        result.complete = False
        result.warnings.append(
            "random sampling without a verifying pass: counts are estimates scaled from the sample; "
            "itemsets may be false positives and frequent itemsets may be missing"
        )
        return result
    t0 = time.perf_counter()
    levels, dropped, border_hits, counted = verify(
        baskets, sample_levels, min_count, max_size, max_candidates
    )
    result.levels = levels
    rep = PassReport(
        2,
        "verify on all baskets",
        "candidate counts",
        0,
        counted,
        result.n_itemsets,
        time.perf_counter() - t0,
        f"{dropped} false positives dropped, {border_hits} negative-border itemsets frequent",
    )
    reports.append(rep)
    if progress:
        progress(rep)
    if border_hits:
        result.complete = False
        result.warnings.append(
            f"random sampling missed frequent itemsets: {border_hits} itemsets of the sample's negative border "
            "are frequent in all the baskets (reported), and their supersets may be missing; use a larger "
            "--sample-fraction, or an exact algorithm (apriori, son, toivonen)"
        )
    return result
