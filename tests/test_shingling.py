"""Shingling: checked against a plain-Python reference on handmade and generated texts."""

from __future__ import annotations

import re
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedupd.similarity.normalization import is_ignorable
from dedupd.similarity.shingling import Shingler, jaccard, normalize
from dedupd.similarity.spec import ShingleSpec


def reference_shingles(text: str, unit: str, k: int) -> set[tuple[str, ...]]:
    """The spec, written plainly: normalise (default-ignorables dropped, NFKC, lowercase, whitespace
    collapsed), cut into units, take every k consecutive units."""
    visible = "".join(c for c in text if not is_ignorable(ord(c)))
    norm = re.sub(r"\s+", " ", unicodedata.normalize("NFKC", visible).lower()).strip()
    units = re.findall(r"\w+", norm) if unit == "word" else list(norm)
    if not units:
        return {("<whole>", norm)} if norm else set()
    if len(units) < k:
        return {tuple(units)}
    return {tuple(units[i : i + k]) for i in range(len(units) - k + 1)}


def ref_jaccard(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    return len(a & b) / len(a | b) if a | b else 0.0


def test_normalize_nfkc_lower_whitespace() -> None:
    """NFKC folds the ligature and full-width letters; case and whitespace are folded; invisible
    (default-ignorable) characters are dropped."""
    assert normalize("  ﬁne\tＡＢＣ \n\n Done ") == "fine abc done"
    assert normalize("  ﬁ\u200bne\tＡ\u00adＢＣ \n\u2067\n Do\u034fne\u2069 ") == "fine abc done"


def test_word_shingles_of_a_rose() -> None:
    """'a rose is a rose is a rose' has 3 distinct word 2-shingles... and 3 distinct 3-shingles."""
    assert len(Shingler(ShingleSpec("word", 2)).hash_set("a rose is a rose is a rose")) == 3
    assert len(Shingler(ShingleSpec("word", 3)).hash_set("a rose is a rose is a rose")) == 3


def test_char_shingles_count_distinct() -> None:
    """'abcab' has char 2-shingles ab, bc, ca (ab twice)."""
    assert len(Shingler(ShingleSpec("char", 2)).hash_set("abcab")) == 3


def test_short_text_is_one_shingle() -> None:
    """A text shorter than k yields one shingle; so does a text with no word at all; empty yields none."""
    sh = Shingler(ShingleSpec("word", 3))
    assert len(sh.hash_set("two words")) == 1
    assert len(sh.hash_set("!!! ???")) == 1
    assert len(sh.hash_set("   ")) == 0
    assert not np.array_equal(sh.hash_set("two words"), sh.hash_set("words two"))


def test_hashes_are_sorted_distinct_uint64() -> None:
    hs = Shingler(ShingleSpec("word", 1)).hash_set("b a c a b")
    assert hs.dtype == np.uint64
    assert hs.tolist() == sorted(set(hs.tolist())) and len(hs) == 3


def test_order_and_position_matter() -> None:
    """Shingles are sequences: 'a b c' and 'c b a' share no word 3-shingle."""
    sh = Shingler(ShingleSpec("word", 3))
    assert np.intersect1d(sh.hash_set("a b c"), sh.hash_set("c b a")).size == 0


words = st.sampled_from(
    [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "Ärger",
        "naïve",
        "x",
        "42",
        "foo_bar",
        "ze\u200bro",
        "\u2067rtl\u2069",
    ]
)
texts = st.lists(words, min_size=0, max_size=30).map(" ".join) | st.text(max_size=60)


@settings(max_examples=150, deadline=None)
@given(a=texts, b=texts, unit=st.sampled_from(["word", "char"]), k=st.integers(1, 5))
def test_matches_reference_jaccard(a: str, b: str, unit: str, k: int) -> None:
    """Set sizes and Jaccard equal the plain-Python reference (no hash collision on small inputs)."""
    sh = Shingler(ShingleSpec(unit, k))  # type: ignore[arg-type]
    ha, hb = sh.hash_set(a), sh.hash_set(b)
    ra, rb = reference_shingles(a, unit, k), reference_shingles(b, unit, k)
    assert len(ha) == len(ra) and len(hb) == len(rb)
    assert jaccard(ha, hb) == pytest.approx(ref_jaccard(ra, rb))


def test_batch_equals_one_by_one() -> None:
    sh = Shingler(ShingleSpec("word", 3))
    docs = [
        "one two three four",
        "",
        "x y",
        "!!!",
        "one two three four, five: six",
        "a " * 50,
        "Ünïcode wörds ok",
    ]
    batch = sh.batch(docs)
    for i, d in enumerate(docs):
        assert np.array_equal(batch.distinct(i), sh.hash_set(d))
    assert batch.n_units.tolist() == [4, 0, 2, 0, 6, 50, 3]
    assert batch.tails == ["three four", "", "x y", "!!!", "five: six", "a a", "wörds ok"]


def test_jaccard_of_sets() -> None:
    a = np.array([1, 2, 3, 4], dtype=np.uint64)
    b = np.array([3, 4, 5], dtype=np.uint64)
    assert jaccard(a, b) == pytest.approx(2 / 5)
    assert jaccard(a[:0], b[:0]) == 0.0
