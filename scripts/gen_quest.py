#!/usr/bin/env python3
"""IBM-Quest-style synthetic baskets (Agrawal & Srikant 1994), e.g. T10I4D100K, with a fixed seed.

Parameters as in the Quest generator: ``T`` average basket size, ``I`` average size of the
potentially frequent itemsets ("patterns"), ``D`` baskets, ``N`` items, ``L`` patterns. Patterns:
sizes Poisson(I) (at least 1); each takes a fraction (exponential, mean ``corr`` = 0.5) of its items
from the previous pattern and the rest at random; weights exponential(1), normalised; each has a
corruption level drawn from N(0.5, 0.1) clipped to [0, 1]. Baskets: sizes Poisson(T) (at least 1);
a basket is filled with weighted random patterns, each corrupted by dropping items while a uniform
draw is below its corruption level; a pattern that overflows the basket is kept whole (the original
puts it in the next basket half the time). Vectorised with numpy, so a million baskets take seconds.

    python scripts/gen_quest.py                      # data/T10I4D100K.txt
    python scripts/gen_quest.py --baskets 1000000    # data/T10I4D1M.txt
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def patterns(
    rng: np.random.Generator, n_items: int, n_patterns: int, avg_size: float, corr: float
) -> list[np.ndarray]:
    out: list[np.ndarray] = []
    prev = np.zeros(0, dtype=np.int64)
    for _ in range(n_patterns):
        size = max(1, int(rng.poisson(avg_size)))
        take = min(len(prev), round(min(1.0, rng.exponential(corr)) * size))
        from_prev = rng.choice(prev, size=take, replace=False) if take else np.zeros(0, dtype=np.int64)
        rest = rng.choice(n_items, size=size, replace=False)
        items = np.unique(np.concatenate([from_prev, rest]))[:size] if take else np.unique(rest)
        out.append(items.astype(np.int64))
        prev = items
    return out


def generate(
    n_baskets: int,
    avg_len: float,
    avg_pat: float,
    n_items: int,
    n_patterns: int,
    seed: int,
    corr: float = 0.5,
) -> list[np.ndarray]:
    """The baskets as arrays of distinct item ids."""
    rng = np.random.default_rng(seed)
    pats = patterns(rng, n_items, n_patterns, avg_pat, corr)
    weights = rng.exponential(1.0, n_patterns)
    weights /= weights.sum()
    corruption = np.clip(rng.normal(0.5, np.sqrt(0.1), n_patterns), 0.0, 1.0)
    sizes = np.maximum(1, rng.poisson(avg_len, n_baskets))
    # a stream of corrupted pattern instances, long enough to fill every basket
    pat_len = np.array([len(p) for p in pats], dtype=np.int64)
    need = int(sizes.sum())
    mean_kept = float((pat_len * weights).sum()) * 0.6 + 1
    picks = rng.choice(n_patterns, size=int(need / mean_kept * 1.5) + 1000, p=weights)
    # items dropped: geometric number of failures while uniform < corruption
    dropped = rng.geometric(1.0 - np.minimum(corruption[picks], 0.999)) - 1
    kept = np.maximum(pat_len[picks] - dropped, 1)
    while kept.sum() < need:  # pragma: no cover - the 1.5 margin makes this rare
        more = rng.choice(n_patterns, size=len(picks), p=weights)
        picks = np.concatenate([picks, more])
        dropped = rng.geometric(1.0 - np.minimum(corruption[picks], 0.999)) - 1
        kept = np.maximum(pat_len[picks] - dropped, 1)
    # basket b takes the instances that start before its target size is reached
    ends = np.cumsum(kept)
    bounds = np.searchsorted(ends, np.cumsum(sizes), side="left") + 1
    per_basket = np.diff(np.concatenate([[0], bounds]))
    n_inst = int(bounds[-1])
    picks, kept = picks[:n_inst], kept[:n_inst]
    basket_of = np.repeat(np.arange(n_baskets, dtype=np.int64), per_basket)
    # every instance keeps a random subset of kept[i] items of its pattern (vectorised)
    flat = np.concatenate(pats)
    pat_start = np.concatenate([[0], np.cumsum(pat_len)[:-1]])
    lens = pat_len[picks]
    inst = np.repeat(np.arange(n_inst, dtype=np.int64), lens)
    offsets = np.arange(int(lens.sum()), dtype=np.int64) - np.repeat(np.cumsum(lens) - lens, lens)
    item = flat[np.repeat(pat_start[picks], lens) + offsets]
    order = np.lexsort((rng.random(item.shape[0]), inst))
    rank = np.empty_like(order)
    rank[order] = offsets  # offsets enumerate 0..len-1 within each instance, in instance order
    keep = rank < np.repeat(kept, lens)
    key = np.unique(basket_of[inst[keep]] * n_items + item[keep])
    rows, items = key // n_items, key % n_items
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=n_baskets))])
    return np.split(items, indptr[1:-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baskets", "-D", type=int, default=100_000)
    ap.add_argument("--avg-len", "-T", type=float, default=10)
    ap.add_argument("--avg-pattern", "-I", type=float, default=4)
    ap.add_argument("--items", "-N", type=int, default=1000)
    ap.add_argument("--patterns", "-L", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20250101)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    d = args.baskets
    label = f"{d // 1_000_000}M" if d % 1_000_000 == 0 else f"{d // 1000}K" if d % 1000 == 0 else str(d)
    out = Path(args.out or f"data/T{args.avg_len:g}I{args.avg_pattern:g}D{label}.txt")
    baskets = generate(d, args.avg_len, args.avg_pattern, args.items, args.patterns, args.seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        f.writelines(" ".join(map(str, b.tolist())) + "\n" for b in baskets)
    total = sum(len(b) for b in baskets)
    print(f"{d} baskets, {total / d:.2f} items per basket, seed {args.seed} -> {out}")


if __name__ == "__main__":
    main()
