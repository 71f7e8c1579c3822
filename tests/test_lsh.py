"""LSH banding: the seeds' b=20 r=5 table, the parameter choice, band hashes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedupd.errors import ConfigError
from dedupd.similarity.lsh import (
    SHORT_SHINGLES,
    LSHParams,
    candidate_probability,
    column_bands,
    pad_rows,
    prefix_length,
)


@pytest.mark.parametrize(
    ("s", "p"),
    [(0.2, 0.006), (0.3, 0.047), (0.4, 0.186), (0.5, 0.470), (0.6, 0.802), (0.7, 0.975), (0.8, 0.9996)],
)
def test_seed_table_b20_r5(s: float, p: float) -> None:
    """seeds/001: b=20, r=5."""
    got = float(candidate_probability(s, 20, 5))
    assert round(got, 4 if p == 0.9996 else 3) == p


def test_seed_single_band_probability() -> None:
    """seeds/001: at s=0.3, one band agrees with probability 0.3^5 = 0.00243; 20 bands give 0.0474."""
    one_band = 0.3**5
    assert one_band == pytest.approx(0.00243)
    assert float(candidate_probability(0.3, 20, 5)) == pytest.approx(0.0474, abs=1e-4)


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
def test_choice_favours_recall_and_fits(threshold: float) -> None:
    p = LSHParams.choose(threshold, 128)
    assert p.bands * p.rows <= 128
    assert p.probability(threshold) >= 0.98
    assert p.probability(threshold - 0.4) < 0.5  # still filters clearly dissimilar pairs


def test_weights_move_the_choice() -> None:
    recall = LSHParams.choose(0.8, 128, fp_weight=0.01, fn_weight=0.99)
    precise = LSHParams.choose(0.8, 128, fp_weight=0.5, fn_weight=0.5)
    assert recall.probability(0.8) > precise.probability(0.8)
    assert recall.probability(0.5) > precise.probability(0.5)


def test_validation_messages() -> None:
    with pytest.raises(ConfigError, match="exceeds num_perm"):
        LSHParams(20, 7).check(128)
    with pytest.raises(ConfigError, match="between 0 and 1"):
        LSHParams.choose(1.0, 128)
    with pytest.raises(ConfigError):
        LSHParams(0, 5)


def test_band_hashes_change_only_in_changed_band() -> None:
    p = LSHParams(4, 3)
    rng = np.random.default_rng(0)
    sig = rng.integers(0, 2**32, size=(1, 13), dtype=np.uint64).astype(np.uint32)
    other = sig.copy()
    other[0, 4] ^= 1  # band 1 (rows 3..5)
    other[0, 12] ^= 1  # unused position
    a, b = p.band_hashes(sig)[0], p.band_hashes(other)[0]
    assert a.dtype == np.uint64 and a.shape == (4,)
    assert [bool(x) for x in a == b] == [True, False, True, True]
    # the same values in two different bands hash differently
    same = np.zeros((1, 12), dtype=np.uint32)
    h = p.band_hashes(same)[0]
    assert len(set(h.tolist())) == 4


@settings(max_examples=500, deadline=None)
@given(
    st.sets(st.integers(0, 40), min_size=1, max_size=SHORT_SHINGLES),
    st.sets(st.integers(0, 40), min_size=1, max_size=SHORT_SHINGLES),
    st.sampled_from([0.3, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95]),
)
def test_prefixes_of_similar_sets_share_an_element(x: set[int], y: set[int], t: float) -> None:
    """Prefix filtering against brute force: whenever the exact Jaccard is at least t, the smallest
    prefix_length elements of each set meet (so a short document finds every near-duplicate through them)."""
    if len(x & y) / len(x | y) < t:
        return
    px = sorted(x)[: prefix_length(len(x), t)]
    py = sorted(y)[: prefix_length(len(y), t)]
    assert set(px) & set(py)


def test_prefix_length_is_the_shortest_that_works() -> None:
    """One element fewer and a pair at the threshold can miss: {0..4} and {1..5} at J = 4/6."""
    x, y, t = set(range(5)), set(range(1, 6)), 4 / 6
    assert len(x & y) / len(x | y) >= t
    n = prefix_length(5, t)
    assert set(sorted(x)[:n]) & set(sorted(y)[:n])
    assert not set(sorted(x)[: n - 1]) & set(sorted(y)[: n - 1])


def test_short_document_columns_are_one_band() -> None:
    assert column_bands(4, 2).tolist() == [0, 1, 2, 2]
    table = pad_rows([np.array([5], np.uint64), np.array([1, 2, 3], np.uint64)], 2)
    assert table.tolist() == [[5, 0, 0], [1, 2, 3]]
