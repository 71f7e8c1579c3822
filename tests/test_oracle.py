"""The exact all-pairs oracle of scripts/oracle.py against a naive pure-Python reference."""

from __future__ import annotations

import random
import re
import unicodedata
from fractions import Fraction

import numpy as np
import pytest
from helpers import load_script

oracle = load_script("oracle")


def _random_sets(rng: random.Random, n: int, universe: int, max_size: int) -> list[np.ndarray]:
    """Sets with many near-duplicates: mutated copies of a few bases, plus random ones and empties."""
    max_size = min(max_size, universe)
    bases = [rng.sample(range(universe), rng.randint(1, max_size)) for _ in range(max(1, n // 6))]
    out: list[np.ndarray] = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.05:
            s: set[int] = set()
        elif roll < 0.75:
            s = set(rng.choice(bases))
            for _ in range(rng.randint(0, 3)):
                if s and rng.random() < 0.5:
                    s.discard(rng.choice(sorted(s)))
                else:
                    s.add(rng.randrange(universe))
        else:
            s = set(rng.sample(range(universe), rng.randint(1, max_size)))
        out.append(np.array(sorted(s), dtype=np.uint64))
    return out


def _check_same(sets: list[np.ndarray], threshold: float, **kw: int) -> int:
    got = oracle.similar_pairs(sets, threshold, **kw)
    want = oracle.naive_pairs(sets, threshold)
    assert got.as_set() == set(want)
    for i, j, inter, union in zip(
        got.i.tolist(), got.j.tolist(), got.inter.tolist(), got.union.tolist(), strict=True
    ):
        assert i < j
        assert Fraction(inter, union) == want[(i, j)]
    return len(want)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("threshold", [0.8, 0.5, 0.3, 1.0])
def test_sparse_oracle_equals_naive_all_pairs(seed: int, threshold: float) -> None:
    rng = random.Random(seed * 31 + int(threshold * 10))
    sets = _random_sets(rng, n=rng.randint(2, 70), universe=rng.choice([8, 30, 200]), max_size=12)
    _check_same(sets, threshold)


@pytest.mark.parametrize("seed", range(6))
def test_chunking_changes_nothing(seed: int) -> None:
    rng = random.Random(1000 + seed)
    sets = _random_sets(rng, n=120, universe=40, max_size=15)
    found = _check_same(sets, 0.8, chunk_rows=7, max_chunk_cells=50)
    assert found == _check_same(sets, 0.8)
    assert found > 0  # the generator makes near-duplicates; the check is not vacuous


def test_threshold_boundary_is_inclusive_and_exact() -> None:
    a = np.arange(5, dtype=np.uint64)  # {0..4}
    b = np.arange(4, dtype=np.uint64)  # J(a, b) = 4/5 exactly
    c = np.arange(1, 6, dtype=np.uint64)  # J(a, c) = 4/6
    pairs = oracle.similar_pairs([a, b, c], 0.8)
    assert pairs.as_set() == {(0, 1)}
    assert (int(pairs.inter[0]), int(pairs.union[0])) == (4, 5)
    assert oracle.similar_pairs([a, b, c], "0.6").as_set() == {(0, 1), (0, 2)}  # J(b, c) = 3/6
    assert oracle.similar_pairs([a, b, c], 0.5).as_set() == {(0, 1), (0, 2), (1, 2)}


def test_empty_sets_never_pair_and_no_input_is_fine() -> None:
    e = np.zeros(0, dtype=np.uint64)
    assert len(oracle.similar_pairs([e, e, e], 0.5)) == 0
    assert len(oracle.similar_pairs([], 0.5)) == 0
    assert oracle.naive_pairs([[], []], 0.5) == {}


# ---------------------------------------------------------------- against the package's shingling
def _ref_word_shingles(text: str, k: int) -> set[tuple[str, ...]]:
    """Word k-shingles as tuples, following the documented normalisation (NFKC, lowercase, \\w+ runs)."""
    words = re.findall(r"\w+", re.sub(r"\s+", " ", unicodedata.normalize("NFKC", text).lower()))
    if len(words) < k:
        return {tuple(words)} if words else set()
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


TEXTS = [
    "The quick brown fox jumps over the lazy dog",
    "the QUICK   brown fox jumps over the lazy dog!",  # same words after normalisation
    "The quick brown fox jumps over the lazy cat",
    "A quick brown fox jumped over the lazy dog",
    "Ｔｈｅ quick brown fox jumps over the lazy dog",  # fullwidth: NFKC folds it
    "a rose is a rose is a rose",
    "a rose is a rose",
    "short text",
    "Python library for parsing command line arguments",
    "Python library for parsing command line arguments (documentation files)",
    "transitional package",
    "transitional dummy package",
]


def test_shingle_sets_match_a_reference_word_shingler() -> None:
    sets = oracle.shingle_sets(TEXTS, "word:3")
    for text, s in zip(TEXTS, sets, strict=True):
        assert s.dtype == np.uint64
        assert np.all(s[1:] > s[:-1])  # sorted, distinct
        assert len(s) == len(_ref_word_shingles(text, 3)), text


def test_oracle_on_texts_equals_jaccard_of_reference_shingles() -> None:
    sets = oracle.shingle_sets(TEXTS, "word:3")
    ref = [_ref_word_shingles(t, 3) for t in TEXTS]
    for threshold in (0.8, 0.5, 0.2):
        want = set()
        for i in range(len(TEXTS)):
            for j in range(i + 1, len(TEXTS)):
                union = len(ref[i] | ref[j])
                if union and Fraction(len(ref[i] & ref[j]), union) >= Fraction(str(threshold)):
                    want.add((i, j))
        assert oracle.similar_pairs(sets, threshold).as_set() == want
    # Concrete expectations on the handmade texts at 0.8.
    got = oracle.similar_pairs(sets, 0.8).as_set()
    assert (0, 1) in got and (0, 4) in got and (1, 4) in got  # normalisation makes them equal
    assert (5, 6) in got  # both are exactly {a rose is, rose is a, is a rose}
    assert (8, 9) not in got  # 5 shared, 7 in the union: 0.71
    assert (0, 2) not in got  # 6 shared, 8 in the union: 0.75
    assert (10, 11) not in got  # fewer than 3 words: one whole-text shingle each, different


def test_pair_jaccard_agrees_with_package_jaccard() -> None:
    from dedupd.similarity.shingling import jaccard

    sets = oracle.shingle_sets(TEXTS, "word:3")
    for i in range(len(sets)):
        for j in range(len(sets)):
            assert oracle.pair_jaccard(sets[i], sets[j]) == pytest.approx(jaccard(sets[i], sets[j]))
