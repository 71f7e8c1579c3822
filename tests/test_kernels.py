"""Compiled kernels (dedupd.similarity.kernels): exactly the values of the numpy reference implementations.

Word shingling (hashes, offsets, word counts, tails), one-permutation signatures (raw, densified, and
densification of raw signatures on both of the kernel's paths), classic MinHash over 2**61-1: on
generated texts and hash sets, on handmade edge cases, and on slices of the real corpora when present.
"""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import sysconfig
import unicodedata
from itertools import islice
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import numpy_batch, numpy_distinct32, numpy_distinct64, oph_densify, oph_signatures, word_table

from dedupd.similarity import kernels, shingling
from dedupd.similarity.hashing import POSITION_MULTIPLIERS
from dedupd.similarity.minhash import EMPTY, MERSENNE61, MinHasher, OnePermHasher
from dedupd.similarity.normalization import is_ignorable
from dedupd.similarity.shingling import Shingler, distinct32
from dedupd.similarity.spec import ShingleSpec

ROOT = Path(__file__).resolve().parents[1]


def assert_same_batch(sh: Shingler, texts: list[str], tails: bool = True) -> None:
    got = sh.batch(texts, tails=tails)
    ref = numpy_batch(sh, texts, tails=tails)
    assert got.hashes.dtype == np.uint64 and got.offsets.dtype == np.int64
    assert got.offsets.tolist() == ref.offsets.tolist()
    assert got.n_units.tolist() == ref.n_units.tolist()
    assert np.array_equal(got.hashes, ref.hashes)
    assert got.tails == ref.tails


# ----- tables -----
def test_constants_match_shingling() -> None:
    assert kernels._POS_MUL == shingling._POS_MUL
    assert kernels._CP_MUL == shingling._CP_MUL
    assert kernels._LEN_MUL == shingling._LEN_MUL


def test_fold_table_is_lower_and_word_for_every_code_point() -> None:
    """The kernel's table: str.lower of each code point (U+0130 aside: it never reaches the kernel), and
    whether that is a word character, as the numpy reference's table says (str.isalnum() or '_'), or else
    whether the code point is default-ignorable."""
    fold = shingling._fold_table(0x10FFFF)
    assert fold.shape == (0x110000,)
    low = np.fromiter(
        (ord(lc) if len(lc := chr(c).lower()) == 1 else c for c in range(0x110000)),
        dtype=np.uint32,
        count=0x110000,
    )
    low[0x130] = ord("i")
    assert np.array_equal(fold & np.uint32(0x3FFFFFFF), low)
    word = word_table(0x10FFFF)
    ignorable = ((fold >> np.uint32(30)) & np.uint32(1)).astype(bool)
    assert np.flatnonzero(ignorable).tolist() == [c for c in range(0x110000) if is_ignorable(c)]
    # a default-ignorable code point is flagged as that, not as a word character (the Hangul fillers are)
    assert np.array_equal((fold >> np.uint32(31)).astype(bool), word[low] & ~ignorable)
    assert np.flatnonzero(word[low] & ignorable).tolist() == [0x115F, 0x1160, 0x3164, 0xFFA0]
    assert [c for c in range(0x110000) if len(chr(c).lower()) != 1] == [0x130]  # why U+0130 is special


def test_isspace_is_str_isspace() -> None:
    table = kernels.isspace_table(0x110000)
    assert np.flatnonzero(table).tolist() == [c for c in range(0x110000) if chr(c).isspace()]


# ----- word shingles -----
EDGE_TEXTS = [
    "",
    " ",
    "\n",
    "!!!",
    "  !!  ?? ",
    "\t\u3000\xa0",
    "one",
    "two words",
    "a b c",
    "a b c d e f g",
    "ΣΑΣ ΟΔΟΣ",
    "όσος Σ σ ς ΣΣ",
    "aΣ\u0301 b",
    "İstanbul İİ i̇",
    "ﬁne ＡＢＣ Ⅻ ㎏",
    "KELVIN \u212a",
    "e\u0301 \u0301start",
    "emoji 😀 ok 𝔘𝔫𝔦",
    "a\ud800b c",
    "under_score 42 x²",
    "tab\tsep\r\nline",
    "Ünïcode wörds ok",
    "ǅungla ǈ",
    "\u0345 ΑΣ\u0345",
    "中文 字 日本語のテキスト",
    "x" * 3000,
    # default-ignorable code points: dropped before NFKC (dedupd.similarity.normalization)
    "co\u200bpy ze\u200dro so\u00adft gra\u034fpheme",
    "\u2067isolated\u2069 \u202eoverride\u202c \u200e\u200f\u061c marks",
    "\u200b",
    "\u200b \u00ad\ufeff",
    "!\u200b!",
    "e\u034f\u0301 \u0130\u200bx \u03a3\u00ad\u03a3",
    "tag\U000e0041\U000e007f vs\ufe0f\U000e0100 \u3164\uffa0\u115f",
]


@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_edge_texts_one_by_one_and_together(k: int) -> None:
    sh = Shingler(ShingleSpec("word", k))
    for t in EDGE_TEXTS:
        assert_same_batch(sh, [t])
    assert_same_batch(sh, EDGE_TEXTS)
    assert_same_batch(sh, EDGE_TEXTS, tails=False)
    assert_same_batch(sh, [t for t in EDGE_TEXTS if t.isascii()])  # the all-ASCII path
    assert_same_batch(sh, [])


def test_word_kernel_grows_its_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """ASCII first (a 128-entry table), then a BMP text, then a text beyond the BMP (the kernel stops,
    the table grows, the batch runs again)."""
    monkeypatch.setattr(shingling, "_FOLD", None)
    sh = Shingler(ShingleSpec("word", 2))
    assert_same_batch(sh, ["plain ascii words"])
    assert shingling._FOLD is not None and shingling._FOLD.shape[0] == 0x80
    assert_same_batch(sh, ["plain", "straße ÄRGER"])
    assert shingling._FOLD.shape[0] == 0x10000
    assert_same_batch(sh, ["straße", "😀 ok \U00010400\U00010401x"])  # Deseret: lowercased beyond the BMP
    assert shingling._FOLD.shape[0] == 0x110000


def test_the_kernel_flags_texts_with_default_ignorables() -> None:
    """The kernel marks the texts that hold a default-ignorable code point (between words or in one, in
    a text with no word): only they are normalised again without them."""
    texts = [
        "plain words",
        "co\u200bpy",
        "ok \u00fc",
        "\u2067x\u2069",
        "\u00ad",
        "a \ufeff",
        "ü ü",
        "x\u3164",
    ]
    buf, doc_start, joined = shingling._kernel_input(texts)
    assert joined is None
    out = kernels.word_shingles(
        np.frombuffer(buf, dtype=np.uint8), shingling._fold_table(0xFFFF), doc_start, 2, POSITION_MULTIPLIERS
    )
    ignored, top = out[-2], out[-1]
    assert top == -1 and ignored.tolist() == [False, True, False, True, True, True, False, True]
    sh = Shingler(ShingleSpec("word", 2))
    assert_same_batch(sh, texts)
    assert np.array_equal(sh.hash_set("co\u200bpy"), sh.hash_set("copy"))


def test_tuple_input_and_whole_text_tail() -> None:
    sh = Shingler(ShingleSpec("word", 3))
    got = sh.batch(("!!! ?", "a b"))
    assert got.tails == ["!!! ?", "a b"]
    assert_same_batch(sh, ["!!! ?", "a b"])


ascii_words = st.sampled_from(["alpha", "Beta", "GAMMA", "x", "42", "foo_bar", "a1"])
unicode_words = st.sampled_from(
    [
        "Ärger",
        "naïve",
        "ΣΟΦΙΑ",
        "ﬁne",
        "İz",
        "日本",
        "𝔘𝔫",
        "ǅ",
        "x²",
        "e\u0301",
        "co\u200bpy",
        "so\u00adft",
        "e\u034f\u0301",
    ]
)
seps = st.sampled_from(
    [" ", "  ", "\n", "\t", ", ", "!", " -- ", "\u3000", "…", "'", "", "\u200d", " \u2069", "\u00ad "]
)
generated = st.lists(st.tuples(ascii_words | unicode_words, seps), max_size=40).map(
    lambda ws: "".join(w + s for w, s in ws)
)
texts = (
    generated
    | st.text(max_size=80)
    | st.text(alphabet=st.characters(max_codepoint=127), max_size=80)
    | st.sampled_from(["", "   ", "!!!", "one", "two words"])
)


@settings(max_examples=200, deadline=None)
@given(batch=st.lists(texts, max_size=12), k=st.integers(1, 5), tails=st.booleans())
def test_word_batch_equals_numpy_reference(batch: list[str], k: int, tails: bool) -> None:
    assert_same_batch(Shingler(ShingleSpec("word", k)), batch, tails)


@settings(max_examples=20, deadline=None)
@given(
    words=st.lists(st.tuples(ascii_words | unicode_words, seps), min_size=1, max_size=60),
    seed=st.integers(0, 2**32 - 1),
)
def test_long_texts(words: list[tuple[str, str]], seed: int) -> None:
    """Long non-ASCII texts are normalised line by line (above 8 kB): the same as the whole text."""
    rng = np.random.default_rng(seed)
    text = "".join(w + s for w, s in (words[i] for i in rng.integers(0, len(words), 3000)))
    assert_same_batch(
        Shingler(ShingleSpec("word", 3)), [text, text.upper(), "short one", text[: len(text) // 2]]
    )


def test_long_text_normalised_by_lines() -> None:
    """NFKC line by line around what composes or decomposes at line ends, and what NFKC makes of U+03F9
    (Σ, whose lowercase depends on its neighbours) or lowercases to two code points (U+0130); the
    default-ignorable code points dropped first."""
    rng = np.random.default_rng(2)
    pieces = [
        "plain ascii line",
        "e\u0301",
        "\u0301e",
        "ﬁne ＡＢＣ",
        "ΟΔΟ\u03f9",
        "\u03f9 x",
        "İİ",
        "한국어",
        "\u1100\u1161",
        "\u1161",
        "Ⅻ ㎏ x²",
        "a" * 700,
        "ǅ",
        "\u0345",
        "😀",
        "\U00010400b",
        "in\u200bvisible",
        "\u00ad",
        "e\u034f\u0301",
        "\u2067x\u2069 y",
    ]
    lines = ["".join(rng.choice(pieces, size=int(rng.integers(0, 6)))) for _ in range(2000)]
    text = "\n".join(lines)
    assert len(text.encode()) > shingling._NFKC_BY_LINES
    ascii_only = "\n".join(["ascii only line"] * 1000)
    dropped = text.translate(dict.fromkeys(map(ord, "\u200b\u00ad\u034f\u2067\u2069")))
    assert shingling._nfkc_lines(text.encode("utf-8")).decode() == unicodedata.normalize("NFKC", text)
    assert shingling._nfkc_lines(text.encode("utf-8"), drop=True).decode() == unicodedata.normalize(
        "NFKC", dropped
    )
    for k in (1, 3):
        assert_same_batch(Shingler(ShingleSpec("word", k)), [text, ascii_only + "\né", text + "\n", "x"])


# ----- one-permutation hashing -----
def random_sets(rng: np.random.Generator, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    hashes = rng.integers(0, 2**64, size=sum(sizes), dtype=np.uint64)
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    return hashes, offsets


@pytest.mark.parametrize("num_perm", [1, 2, 7, 64, 128, 200])
def test_oph_equals_numpy_reference(num_perm: int) -> None:
    rng = np.random.default_rng(num_perm)
    oph = OnePermHasher(num_perm, 3)
    sizes = [0, 1, 2, 3, 5, 8, 13, 30, 60, 100, 150, 300, 1000, 5000, *rng.integers(0, 400, 40).tolist()]
    hashes, offsets = random_sets(rng, sizes)
    hashes[:50] = np.array([0, 2**64 - 1] * 25, dtype=np.uint64)  # extremes
    raw = oph.signatures(hashes, offsets, densify=False)
    assert np.array_equal(raw, oph_signatures(oph, hashes, offsets, densify=False))
    dense = oph_signatures(oph, hashes, offsets)
    assert np.array_equal(oph.signatures(hashes, offsets), dense)
    assert np.array_equal(oph.densify(raw), dense)
    assert np.array_equal(oph.densify(raw[5]), dense[5])  # one signature
    assert np.array_equal(oph.densify(np.asfortranarray(raw)), dense)
    assert (raw[0] == EMPTY).all() and (dense[0] == EMPTY).all()


@pytest.mark.parametrize("limit", [0, 10**9])
def test_oph_both_densification_paths(limit: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Column minimum over the non-empty bins and walking each empty bin's order give the same donors."""
    from dedupd.similarity import minhash

    monkeypatch.setattr(minhash, "_scan_limit", lambda k: limit)
    rng = np.random.default_rng(5)
    for num_perm in (16, 128):
        oph = OnePermHasher(num_perm, 8)
        raw = np.full((300, num_perm), EMPTY, dtype=np.uint32)
        for row in raw:
            m = int(rng.integers(0, num_perm + 1))
            row[rng.choice(num_perm, m, replace=False)] = rng.integers(0, 2**32 - 1, m, dtype=np.uint32)
        assert np.array_equal(oph.densify(raw), oph_densify(oph, raw))


def test_oph_append_min_then_densify() -> None:
    """What an append does: densify(min(raw(A), raw(B))) == signature(A | B), kernel and reference."""
    oph = OnePermHasher(128, 2)
    rng = np.random.default_rng(9)
    a, b = rng.integers(0, 2**63, 6, dtype=np.uint64), rng.integers(0, 2**63, 9, dtype=np.uint64)
    raw = oph.signatures(np.concatenate([a, b]), np.array([0, 6, 15]), densify=False)
    union = oph.signature(np.concatenate([a, b]))
    assert np.array_equal(oph.densify(np.minimum(raw[0], raw[1])), union)
    assert np.array_equal(oph_densify(oph, np.minimum(raw[0], raw[1])), union)


# ----- classic MinHash -----
@pytest.mark.parametrize("num_perm", [1, 3, 128])
def test_classic_equals_numpy_reference(num_perm: int) -> None:
    rng = np.random.default_rng(num_perm)
    mh = MinHasher(num_perm, 11)
    assert mh.family.prime == MERSENNE61
    sizes = [0, 1, 2, 7, 100, 0, 1000, *rng.integers(0, 60, 30).tolist()]
    hashes, offsets = random_sets(rng, sizes)
    extremes = [
        0,
        1,
        MERSENNE61 - 1,
        MERSENNE61,
        MERSENNE61 + 1,
        2**61,
        2**62,
        2**63,
        2**64 - 1,
        2**32 - 1,
        2**32,
    ]
    hashes[1 : 1 + len(extremes)] = np.array(extremes, dtype=np.uint64)
    got = mh.signatures(hashes, offsets)
    assert got.dtype == np.uint32
    assert np.array_equal(got, mh._numpy_signatures(hashes, offsets))
    assert (got[0] == EMPTY).all()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_classic_generated(xs: list[int], seed: int) -> None:
    mh = MinHasher(16, seed)
    hashes = np.array(xs, dtype=np.uint64)
    offsets = np.array([0, len(xs) // 2, len(xs)], dtype=np.int64)
    assert np.array_equal(mh.signatures(hashes, offsets), mh._numpy_signatures(hashes, offsets))


# ----- the real corpora -----
def corpus_slice(name: str, n: int, tmp: Path) -> list[str]:
    """The first n texts of data/NAME.jsonl; on a clean checkout, built from this machine's own sources:
    the Python standard library's files, or the apt lists (scripts/corpora.py, when they exist)."""
    path = ROOT / "data" / f"{name}.jsonl"
    if not path.exists() and name == "python":
        stdlib = Path(sysconfig.get_paths()["stdlib"])
        files = sorted(stdlib.rglob("*.py"))[: n * 2]
        texts = [f.read_text("utf-8", "surrogateescape") for f in files]
        return [t for t in texts if t.strip()][:n]
    if not path.exists() and glob.glob("/var/lib/apt/lists/*_Packages*"):
        path = tmp / f"{name}.jsonl"
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "corpora.py"), name, "--out", str(path)],
            check=True,
            capture_output=True,
            timeout=300,
        )
    if not path.exists():
        pytest.skip(f"{path} is not there and there are no apt lists to build it from (scripts/corpora.py)")
    with path.open() as f:
        return [json.loads(line)["text"] for line in islice(f, n)]


@pytest.mark.parametrize(("name", "n"), [("debian", 3000), ("python", 300)])
def test_corpus_slices(name: str, n: int, tmp_path: Path) -> None:
    docs = corpus_slice(name, n, tmp_path)
    if name == "python":  # the non-ASCII files first: every batch takes the per-text path
        docs = sorted(docs, key=lambda t: t.isascii())
    sh = Shingler(ShingleSpec("word", 3))
    oph, mh = OnePermHasher(128, 1), MinHasher(128, 1)
    for i in range(0, len(docs), 256):
        batch = docs[i : i + 256]
        assert_same_batch(sh, batch)
        got = sh.batch(batch, tails=False)
        assert np.array_equal(
            oph.signatures(got.hashes, got.offsets), oph_signatures(oph, got.hashes, got.offsets)
        )
        if i < 1024:
            assert np.array_equal(
                mh.signatures(got.hashes, got.offsets), mh._numpy_signatures(got.hashes, got.offsets)
            )


# ----- startup -----
def test_cli_does_not_import_numba() -> None:
    """`dedupd --help` and the pure modules leave numba unimported: the kernels load on first use."""
    code = (
        "import sys, dedupd.cli, dedupd.similarity.fingerprint, dedupd.similarity.shingling, dedupd.similarity.minhash; "
        "assert 'numba' not in sys.modules and 'dedupd.similarity.kernels' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=40), max_size=12))
def test_distinct32_equals_numpy_reference(docs: list[list[int]]) -> None:
    # values collide on their low 32 bits often: repeats of the same and of different 64-bit hashes
    docs = [d + [x ^ (1 << 40) for x in d[:3]] + d[:2] for d in docs]
    hashes = np.array([x for d in docs for x in d], dtype=np.uint64)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    got, got_off = distinct32(hashes, offsets)
    want, want_off = numpy_distinct32(hashes, offsets)
    assert got.dtype == np.uint32 and got.tolist() == want.tolist() and got_off.tolist() == want_off.tolist()
    for i, d in enumerate(docs):
        assert got[got_off[i] : got_off[i + 1]].tolist() == sorted({x & 0xFFFFFFFF for x in d})


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**64 - 1), max_size=24), max_size=12), st.integers(0, 12))
def test_distinct64_equals_numpy_reference(docs: list[list[int]], limit: int) -> None:
    docs = [d + d[:3] for d in docs]  # repeats
    hashes = np.array([x for d in docs for x in d], dtype=np.uint64)
    offsets = np.zeros(len(docs) + 1, dtype=np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    got, got_off, got_kept = shingling.distinct64(hashes, offsets, limit)
    want, want_off, want_kept = numpy_distinct64(hashes, offsets, limit)
    assert got.dtype == np.uint64 and got.tolist() == want.tolist() and got_off.tolist() == want_off.tolist()
    assert got_kept.tolist() == want_kept.tolist()
    for i, d in enumerate(docs):
        kept = len(d) <= 2 * limit and len(set(d)) <= limit
        assert bool(got_kept[i]) == kept
        assert got[got_off[i] : got_off[i + 1]].tolist() == (sorted(set(d)) if kept else [])
