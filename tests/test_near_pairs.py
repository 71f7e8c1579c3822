"""The near pairs of a sample and their distribution, against a brute-force oracle on Python sets."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest

from dedupd.similarity import near_pairs as near_pairs_module
from dedupd.similarity.near_pairs import TooManyPairsError, lsh_candidates, near_pairs
from dedupd.similarity.pair_distribution import bin_edges, distribution

WORDS = [f"w{i}" for i in range(400)]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _edited(rng: random.Random, base: str, share: float) -> str:
    """``base`` with about ``share`` of its words replaced (and now and then a few appended)."""
    words = base.split()
    for i in rng.sample(range(len(words)), max(1, round(share * len(words)))):
        words[i] = rng.choice(WORDS)
    if rng.random() < 0.3:
        words += [rng.choice(WORDS) for _ in range(3)]
    return " ".join(words)


def sample_texts(seed: int = 7, bases: int = 60) -> list[str]:
    """Articles of 40-80 words, with variants at every distance, exact copies, a flood, and an empty text."""
    rng = random.Random(seed)
    texts: list[str] = []
    for _ in range(bases):
        base = _text(rng, rng.randint(40, 80))
        texts.append(base)
        for _ in range(rng.randint(0, 3)):
            texts.append(_edited(rng, base, rng.choice([0.02, 0.05, 0.1, 0.15, 0.2, 0.3])))
        if rng.random() < 0.2:
            texts.append(base.upper())  # the same shingles after normalisation
    texts += [texts[3]] * 5 + [""] + ["short text"] * 2
    rng.shuffle(texts)
    return texts


def shingles(text: str, k: int = 3) -> frozenset[tuple[str, ...]]:
    """Word k-shingles as the course defines them (a text of fewer than k words: one shingle of them all)."""
    words = re.findall(r"\w+", text.lower())
    if not words:
        return frozenset()
    if len(words) < k:
        return frozenset([tuple(words)])
    return frozenset(tuple(words[i : i + k]) for i in range(len(words) - k + 1))


def oracle(texts: list[str], lowest: float) -> dict[tuple[int, int], float]:
    """Every pair of documents at or above ``lowest``, by brute force on Python sets."""
    sets = [shingles(t) for t in texts]
    out = {}
    for i, j in itertools.combinations(range(len(texts)), 2):
        a, b = sets[i], sets[j]
        if a and b and (sim := len(a & b) / len(a | b)) >= lowest:
            out[(i, j)] = sim
    return out


def expanded(pairs: near_pairs_module.NearPairs) -> dict[tuple[int, int], float]:
    """The document pairs that the group pairs stand for."""
    members = [np.flatnonzero(pairs.group_of == g).tolist() for g in range(pairs.firsts.size)]
    out = {}
    for a, b, sim in zip(pairs.left.tolist(), pairs.right.tolist(), pairs.jaccard.tolist(), strict=True):
        combos = (
            itertools.combinations(members[a], 2) if a == b else itertools.product(members[a], members[b])
        )
        for i, j in combos:
            out[(min(i, j), max(i, j))] = sim
    return out


@pytest.mark.parametrize("method", ["all pairs", "LSH"])
def test_the_pairs_are_the_oracles(method: str) -> None:
    """Both ways find exactly the pairs at or above 0.3 of the oracle, with their exact similarity."""
    texts = sample_texts()
    truth = oracle(texts, 0.3)
    assert len(truth) > 60 and any(s == 1.0 for s in truth.values()) and any(s < 0.5 for s in truth.values())
    pairs = near_pairs(texts, "word:3", 0.3, method=method)
    found = expanded(pairs)
    assert found.keys() == truth.keys()
    for key, sim in truth.items():
        assert found[key] == pytest.approx(sim, abs=1e-12)
    assert pairs.method == method and int(pairs.weights.sum()) == len(truth)


def test_the_distribution_counts_the_oracles_pairs_per_bin() -> None:
    """Pairs per bin and at or above each bin's lower end; documents and alerts per threshold."""
    texts = sample_texts(seed=11, bases=80)
    truth = oracle(texts, 0.3)
    report = distribution(near_pairs(texts, "word:3", 0.3, method="LSH"), [0.3, 0.5, 0.75, 0.8, 0.9], 128)
    edges = bin_edges(0.3)
    want = [
        sum(1 for s in truth.values() if lo <= s < hi or (hi == 1.0 and s == 1.0))
        for lo, hi in itertools.pairwise(edges)
    ]
    assert [b.pairs for b in reversed(report.bins)] == want and sum(want) == len(truth)
    assert [b.at_or_above for b in report.bins] == list(itertools.accumulate(reversed(want)))
    for b in report.bins:
        if b.pairs:
            assert b.example is not None and b.low <= b.example.jaccard <= b.high
            assert truth[(b.example.left, b.example.right)] == pytest.approx(b.example.jaccard)
        else:
            assert b.example is None
    for row in report.thresholds:
        caught = [key for key, s in truth.items() if s >= row.threshold]
        assert row.pairs == len(caught)
        assert row.documents == len({i for key in caught for i in key})
        assert row.alerts == len({j for _, j in caught})  # the later document of each pair alerts
    assert report.identical_pairs == sum(1 for s in truth.values() if s == 1.0)
    assert report.documents == len(texts) and report.without_shingles == 1


def test_thresholds_say_what_they_cost() -> None:
    """The banding the daemon would choose, the S-curve's rates around t, and the bucket bytes."""
    from dedupd.similarity.lsh import LSHParams, candidate_probability

    report = distribution(near_pairs(sample_texts(), "word:3"), [0.6, 0.8], 128, configured=0.8)
    six, eight = report.thresholds
    assert (eight.bands, eight.rows) == (25, 5) and eight.configured and not six.configured
    chosen = LSHParams.choose(0.6, 128)
    assert (six.bands, six.rows) == (chosen.bands, chosen.rows)
    assert eight.fn_rate == pytest.approx(1 - float(candidate_probability(0.85, 25, 5)))
    assert eight.fp_rate == pytest.approx(float(candidate_probability(0.7, 25, 5)))
    assert eight.bucket_bytes == 25 * 18  # no short document at 0.8: its bands only
    assert six.bucket_bytes > six.bands * 18  # below 0.75 the short documents' prefixes add entries


def test_a_flood_of_copies_costs_one_document() -> None:
    """Three thousand copies of a text are one group: C(3000, 2) pairs at 1.0, counted, not listed."""
    rng = random.Random(3)
    base = _text(rng, 60)
    texts = [base] * 3000 + [base + " with a byline", _text(rng, 60)]
    pairs = near_pairs(texts, "word:3")
    assert pairs.firsts.size == 3 and pairs.left.size == 2
    report = distribution(pairs, [0.8], 128)
    copies = 3000 * 2999 // 2
    assert report.identical_pairs == copies and report.bins[0].pairs == copies + 3000  # the byline too
    assert report.thresholds[0].pairs == copies + 3000  # and the variant with each copy
    assert report.thresholds[0].alerts == 3000  # every copy but the first, and the variant


def test_lsh_candidates_are_the_rows_sharing_a_column() -> None:
    """Against brute force on hashes from a small alphabet (runs of every length)."""
    rng = np.random.default_rng(5)
    hashes = rng.integers(0, 30, size=(200, 6)).astype(np.uint64)
    left, right = lsh_candidates(hashes)
    want = {(i, j) for i, j in itertools.combinations(range(200), 2) if (hashes[i] == hashes[j]).any()}
    assert set(zip(left.tolist(), right.tolist(), strict=True)) == want and left.size == len(want)


def test_too_many_candidates_refuse_with_a_way_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(near_pairs_module, "MAX_CANDIDATES", 50)
    hashes = np.zeros((20, 3), dtype=np.uint64)  # every pair in every band: 190 pairs
    with pytest.raises(TooManyPairsError, match="--limit"):
        lsh_candidates(hashes)
