"""MinHash: the seeds' worked example, overflow-free arithmetic, and estimates near exact Jaccard."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedupd.errors import ConfigError
from dedupd.similarity.minhash import (
    EMPTY,
    MERSENNE61,
    HashFamily,
    MinHasher,
    OnePermHasher,
    estimate,
    make_hasher,
    minhash_matrix,
)


def test_seed_worked_example() -> None:
    """seeds/001: rows 0-4, h1 = x+1 mod 5, h2 = 3x+1 mod 5 -> h1: 1 3 0 1, h2: 0 2 0 0."""
    family = HashFamily(np.array([1, 3], np.uint64), np.array([1, 1], np.uint64), 5)
    s1, s2, s3, s4 = [0, 3], [2], [1, 3, 4], [0, 2, 3]
    x = np.array(s1 + s2 + s3 + s4, dtype=np.uint64)
    offsets = np.array([0, 2, 3, 6, 9], dtype=np.int64)
    m = minhash_matrix(x, offsets, family)
    assert m.T.tolist() == [[1, 3, 0, 1], [0, 2, 0, 0]]
    # the signature matrix says SIM(S1, S4) = 1.0 while the true Jaccard is 2/3 (seeds/001)
    assert (m[0] == m[3]).mean() == 1.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, MERSENNE61 - 1), min_size=1, max_size=40), st.integers(0, 2**32 - 1))
def test_mersenne_arithmetic_equals_python_integers(xs: list[int], seed: int) -> None:
    """(a*x + b) mod (2^61-1) on split halves equals exact big-integer arithmetic, extremes included."""
    fam = HashFamily.seeded(8, seed)
    xs = [*xs, 0, 1, MERSENNE61 - 1, 2**32 - 1, 2**32, 2**60]
    got = fam.apply(np.array(xs, dtype=np.uint64))
    for i, x in enumerate(xs):
        for j in range(8):
            assert int(got[i, j]) == (int(fam.a[j]) * x + int(fam.b[j])) % MERSENNE61


def test_reduce_maps_into_field() -> None:
    fam = HashFamily.seeded(4, 1)
    x = np.array([0, MERSENNE61, MERSENNE61 + 5, 2**64 - 1], dtype=np.uint64)
    assert [int(v) for v in fam.reduce(x)] == [
        v % MERSENNE61 for v in (0, MERSENNE61, MERSENNE61 + 5, 2**64 - 1)
    ]


def test_estimate_within_expected_error_of_exact_jaccard() -> None:
    """Over many generated pairs, |estimate - J| stays within 4 standard errors, and is unbiased on average."""
    rng = np.random.default_rng(7)
    mh = MinHasher(256, 3)
    errors = []
    for _ in range(60):
        universe = rng.choice(2**62, size=400, replace=False).astype(np.uint64)
        a = np.unique(universe[rng.random(400) < rng.uniform(0.3, 0.9)])
        b = np.unique(np.concatenate([a[rng.random(a.size) < rng.uniform(0.5, 1.0)], universe[:50]]))
        j = np.intersect1d(a, b).size / np.union1d(a, b).size
        est = estimate(mh.signature(a), mh.signature(b))
        se = math.sqrt(max(j * (1 - j), 1e-3) / 256)
        assert abs(est - j) <= 4 * se + 1e-9
        errors.append(est - j)
    assert abs(float(np.mean(errors))) < 0.02


def test_identical_sets_identical_signatures_and_batch_equals_single() -> None:
    mh = MinHasher(64, 9)
    a = np.array([5, 7, 11, 2**63], dtype=np.uint64)
    b = np.array([1, 2], dtype=np.uint64)
    batch = mh.signatures(np.concatenate([a, b]), np.array([0, 4, 6]))
    assert np.array_equal(batch[0], mh.signature(a)) and np.array_equal(batch[1], mh.signature(b))
    assert batch.dtype == np.uint32 and estimate(mh.signature(a), mh.signature(a.copy())) == 1.0


def test_empty_document_gets_empty_signature() -> None:
    mh = MinHasher(16, 1)
    sigs = mh.signatures(np.array([3], np.uint64), np.array([0, 0, 1, 1]))
    assert (sigs[0] == EMPTY).all() and (sigs[2] == EMPTY).all() and not (sigs[1] == EMPTY).all()


def test_seed_changes_signature_and_mismatch_is_refused() -> None:
    a = np.arange(100, dtype=np.uint64)
    assert not np.array_equal(MinHasher(32, 1).signature(a), MinHasher(32, 2).signature(a))
    with pytest.raises(ConfigError, match="different num_perm"):
        estimate(MinHasher(32, 1).signature(a), MinHasher(64, 1).signature(a))


def test_family_validation() -> None:
    with pytest.raises(ConfigError):
        HashFamily(np.array([1], np.uint64), np.array([1, 2], np.uint64), 5)
    with pytest.raises(ConfigError):
        HashFamily(np.array([1], np.uint64), np.array([1], np.uint64), 2**40)


def test_oph_estimate_within_expected_error() -> None:
    """One-permutation hashing with densification: small and large sets, unbiased, near classic error."""
    rng = np.random.default_rng(11)
    oph = OnePermHasher(128, 4)
    for size in (8, 40, 400, 4000):
        errors = []
        for _ in range(40):
            u = rng.integers(0, 2**63, size=2 * size, dtype=np.uint64)
            a = u[:size]
            b = np.concatenate([u[: int(size * 0.85)], u[size : size + int(size * 0.15)]])
            j = np.intersect1d(a, b).size / np.union1d(a, b).size
            errors.append(estimate(oph.signature(a), oph.signature(b)) - j)
        err = np.array(errors)
        assert abs(err.mean()) < 0.03, size
        assert np.sqrt((err**2).mean()) < 0.07, size


def test_oph_raw_signatures_combine_by_minimum() -> None:
    """densify(min(raw(A), raw(B))) is the signature of A | B: what an append relies on."""
    oph = OnePermHasher(64, 2)
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2**63, size=10, dtype=np.uint64)
    b = rng.integers(0, 2**63, size=7, dtype=np.uint64)
    raw = oph.signatures(np.concatenate([a, b]), np.array([0, 10, 17]), densify=False)
    assert (raw == EMPTY).any()  # 10 shingles cannot fill 64 bins
    union = oph.signature(np.concatenate([a, b]))
    assert np.array_equal(oph.densify(np.minimum(raw[0], raw[1])), union)
    assert not (union == EMPTY).any()


def test_make_hasher() -> None:
    assert isinstance(make_hasher("oph", 8, 1), OnePermHasher)
    assert isinstance(make_hasher("classic", 8, 1), MinHasher)
    with pytest.raises(ConfigError, match="unknown minhash scheme"):
        make_hasher("lsh", 8, 1)
