"""Fingerprints: an append equals an upsert of the concatenated text (boundary shingles included)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from dedupd.similarity.fingerprint import AppendTo, Fingerprinter
from dedupd.similarity.spec import IndexSpec


@pytest.mark.parametrize("minhash", ["oph", "classic"])
@pytest.mark.parametrize("shingle", ["word:3", "char:4", "word:1"])
@pytest.mark.parametrize(
    ("old", "chunks"),
    [
        ("the quick brown fox jumps", ["over the lazy dog", "and runs away"]),
        ("tiny", ["then a much longer continuation of it"]),  # old shorter than k
        ("alpha beta gamma delta", ["!!!", "epsilon"]),  # a chunk with no word
        ("", ["starts empty and grows"]),
        ("ab cd", ["ef gh", "  ij"]),  # char tails that start with a space
    ],
)
def test_append_equals_upsert_of_concatenation(
    shingle: str, old: str, chunks: list[str], minhash: str
) -> None:
    fpr = Fingerprinter(IndexSpec(shingle, 64, 5, 8, 8, minhash))
    fp = fpr.compute([old])[0]
    text = old
    for chunk in chunks:
        fp = fpr.compute([AppendTo(fp, chunk)])[0]
        text = text + "\n" + chunk
        full = fpr.compute([text])[0]
        assert np.array_equal(fp.signature, full.signature)
        assert np.array_equal(fp.raw, full.raw)
        assert np.array_equal(fp.shingles, full.shingles)
        if shingle.startswith("word"):  # the tail is a slice of the text: the same words
            assert re.findall(r"\w+", fp.tail) == re.findall(r"\w+", full.tail)
        else:
            assert fp.tail == full.tail


def test_empty_text_is_empty_and_unbanded() -> None:
    fpr = Fingerprinter(IndexSpec("word:3", 64, 5, 8, 8))
    empty, full = fpr.compute(["   ", "some words here"])
    assert empty.empty and not full.empty
    (row,) = fpr.band_hashes([full])
    assert row.shape == (8,)  # 8 bands (at threshold 0.8 no shingle prefix: lsh.short_limit)
    low = Fingerprinter(IndexSpec("word:3", 64, 5, 8, 8, threshold=0.5))
    (row,) = low.band_hashes(low.compute(["some words here"]))
    assert row.shape == (9,)  # and the one shingle of a short document below 0.75 (lsh.prefix_length)
