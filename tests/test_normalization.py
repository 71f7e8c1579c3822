"""Normalisation (dedupd.similarity.normalization): default-ignorable code points are dropped before NFKC,
in every path (the word kernel, char shingling, appends, the input bound), so one invisible character in
every word of a copy does not hide it; texts without them keep their shingles and signatures exactly.

The index side (the version in the spec, the refusal, the rebuild) is tests/test_normalization_index.py.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata

import numpy as np
import pytest

from dedupd.daemon.entries import parse_entry
from dedupd.errors import InputError, ParameterMismatchError
from dedupd.ops.rebuild import rebands_only
from dedupd.settings import load_settings
from dedupd.similarity import normalization, shingling
from dedupd.similarity.fingerprint import AppendTo, Fingerprinter
from dedupd.similarity.normalization import (
    DEFAULT_IGNORABLE,
    NORMALIZATION,
    drop_ignorable,
    is_ignorable,
    nfkc,
    normalized_bytes,
)
from dedupd.similarity.shingling import Shingler, normalize
from dedupd.similarity.spec import IndexSpec, ShingleSpec

IGNORABLE = frozenset(c for a, b in DEFAULT_IGNORABLE for c in range(a, b + 1))

# the invisible characters of issue 29, and the bidi controls
ZWSP, ZWNJ, ZWJ, SHY, CGJ = "\u200b", "\u200c", "\u200d", "\u00ad", "\u034f"
LRM, RLM, ALM, WJ, BOM = "\u200e", "\u200f", "\u061c", "\u2060", "\ufeff"
LRE, RLE, PDF, LRO, RLO = "\u202a", "\u202b", "\u202c", "\u202d", "\u202e"
LRI, RLI, FSI, PDI = "\u2066", "\u2067", "\u2068", "\u2069"
INVISIBLE = [ZWSP, ZWNJ, ZWJ, SHY, CGJ, LRM, RLM, ALM, WJ, BOM, LRE, RLE, PDF, LRO, RLO, LRI, RLI, FSI, PDI]

ORIGINAL = (
    "The quarterly earnings report showed that the central bank kept its policy rate while "
    "consumer demand for energy and retail services kept rising across every market"
)


def in_every_word(text: str, mark: str) -> str:
    """``mark`` inside every word (after its first letter; a one-letter word gets it after)."""
    return " ".join(w[:1] + mark + w[1:] for w in text.split(" "))


def wrapped(text: str, left: str, right: str) -> str:
    """Every word between two bidi controls (an isolate or an embedding and its closing one)."""
    return " ".join(left + w + right for w in text.split(" "))


# ----- the table -----
def test_the_table_covers_the_named_characters() -> None:
    names = [
        "ZERO WIDTH SPACE",
        "ZERO WIDTH NON-JOINER",
        "ZERO WIDTH JOINER",
        "SOFT HYPHEN",
        "COMBINING GRAPHEME JOINER",
        "LEFT-TO-RIGHT MARK",
        "RIGHT-TO-LEFT MARK",
        "ARABIC LETTER MARK",
        "LEFT-TO-RIGHT EMBEDDING",
        "RIGHT-TO-LEFT EMBEDDING",
        "POP DIRECTIONAL FORMATTING",
        "LEFT-TO-RIGHT OVERRIDE",
        "RIGHT-TO-LEFT OVERRIDE",
        "LEFT-TO-RIGHT ISOLATE",
        "RIGHT-TO-LEFT ISOLATE",
        "FIRST STRONG ISOLATE",
        "POP DIRECTIONAL ISOLATE",
        "WORD JOINER",
        "INVISIBLE SEPARATOR",
        "ZERO WIDTH NO-BREAK SPACE",
        "MONGOLIAN VOWEL SEPARATOR",
        "MONGOLIAN FREE VARIATION SELECTOR ONE",
        "VARIATION SELECTOR-1",
        "VARIATION SELECTOR-16",
        "VARIATION SELECTOR-17",
        "VARIATION SELECTOR-256",
        "HANGUL FILLER",
        "HALFWIDTH HANGUL FILLER",
        "HANGUL CHOSEONG FILLER",
        "KHMER VOWEL INHERENT AQ",
        "SHORTHAND FORMAT LETTER OVERLAP",
        "MUSICAL SYMBOL BEGIN BEAM",
        "LANGUAGE TAG",
        "TAG LATIN SMALL LETTER A",
        "CANCEL TAG",
    ]
    for name in names:
        assert is_ignorable(ord(unicodedata.lookup(name))), name
    assert set(map(ord, INVISIBLE)) <= IGNORABLE
    assert not any(is_ignorable(c) for c in range(0x80))  # ASCII holds none: ASCII texts skip the drop
    assert not any(chr(c).isspace() for c in IGNORABLE)  # (they are no separators: dropped, not split on)


# Cf code points that are not default-ignorable (DerivedCoreProperties.txt: Default_Ignorable_Code_Point is
# Other_Default_Ignorable_Code_Point + Cf + Variation_Selector - White_Space - FFF9..FFFB - 13430..1343F -
# Prepended_Concatenation_Mark): visible or shaping marks
VISIBLE_FORMAT = frozenset(
    [
        *(*range(0x600, 0x606), 0x6DD, 0x70F, 0x890, 0x891, 0x8E2, 0x110BD, 0x110CD),  # prepended marks
        *range(0xFFF9, 0xFFFC),  # interlinear annotation
        *range(0x13430, 0x13440),  # Egyptian hieroglyph format controls
    ]
)


def test_the_table_agrees_with_unicodedata() -> None:
    """Python's unicodedata has no Default_Ignorable_Code_Point, but it has what the property is derived
    from: every format character (Cf) and every variation selector is in the table but the documented
    exceptions, and the table holds only format characters, marks and fillers, and unassigned ones."""
    fmt = {c for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"}
    assert fmt - IGNORABLE <= VISIBLE_FORMAT, sorted(map(hex, fmt - IGNORABLE - VISIBLE_FORMAT))
    selectors = {c for c in range(0x110000) if "VARIATION SELECTOR" in unicodedata.name(chr(c), "")}
    assert selectors <= IGNORABLE
    assert {unicodedata.category(chr(c)) for c in IGNORABLE} <= {"Cf", "Mn", "Lo", "Cn"}


def test_nfkc_makes_no_ignorable_of_another_code_point() -> None:
    """Why dropping before NFKC suffices: NFKC of a code point outside the table has none in it (U+3164
    and U+FFA0 become U+1160, but all three are in the table)."""
    made = [
        c
        for c in range(0x110000)
        if c not in IGNORABLE
        and not 0xD800 <= c <= 0xDFFF
        and any(ord(x) in IGNORABLE for x in unicodedata.normalize("NFKC", chr(c)))
    ]
    assert made == []


# ----- normalising -----
def test_normalize_drops_them_before_nfkc() -> None:
    assert normalize(f"co{ZWSP}py  SO{SHY}FT {ZWJ}x{CGJ}") == "copy soft x"
    assert normalize(f"{RLI}abc{PDI} {BOM}def") == "abc def"
    assert nfkc(f"e{CGJ}\u0301") == "\u00e9"  # dropped first: the accent composes with its letter
    assert nfkc("\ufb01\u3164") == "fi"  # a ligature NFKC folds, a Hangul filler dropped
    assert normalize(ZWSP * 5) == "" and normalize(f" {ZWSP} ") == ""
    text = "no invisible character here, ünïcode included"
    assert drop_ignorable(text) is text and nfkc(text) == unicodedata.normalize("NFKC", text)


def test_long_texts_drop_them_line_by_line() -> None:
    """Above 8 kB a text is normalised only on its non-ASCII lines: the same text as the whole of it."""
    lines = [
        f"line {i} plain ascii" if i % 3 else in_every_word(f"line {i} has in{SHY}visible marks", ZWSP)
        for i in range(2000)
    ]
    text = "\n".join([*lines, f"e{CGJ}\u0301 \ufb01ne {RLO}x{PDF}"])
    assert len(text.encode()) > shingling._NFKC_BY_LINES
    assert shingling._nfkc_lines(text.encode("utf-8"), drop=True).decode() == nfkc(text)
    assert shingling._kernel_text(text, drop=True).decode() == nfkc(text)
    assert ZWSP not in nfkc(text) and "\u00e9" in nfkc(text)


def test_normalized_bytes_count_the_text_without_them() -> None:
    """The input bound (max_normalized_bytes) counts the text without them; Entry.size (what fingerprinting
    takes) may count them (no text is searched for them unless it is over the bound)."""
    assert normalized_bytes(ZWSP * 10, 30) == 30 and normalized_bytes(ZWSP * 10, 30, limit=29) == 0
    assert normalized_bytes(f"a{SHY}b", 4, limit=3) == 2 and normalized_bytes(f"a{SHY}b", 4, limit=4) == 4
    assert normalized_bytes("\ufdfa", 3) == 33 and normalized_bytes("\ufdfa" + ZWSP, 6, limit=32) == 33
    assert normalized_bytes("plain", 5, limit=1) == 5 and normalized_bytes("d\u00e9j\u00e0", 6) == 6
    copy = in_every_word(ORIGINAL, ZWSP).encode()
    bound = len(ORIGINAL.encode())
    entry = parse_entry("1-0", {b"id": b"d", b"text": copy}, 10_000, 64, max_normalized_bytes=bound)
    assert entry.size == bound  # accepted: without its zero-width spaces it is the original
    with pytest.raises(InputError, match="max_normalized_bytes"):
        parse_entry("1-0", {b"id": b"d", b"text": copy + b"!"}, 10_000, 64, max_normalized_bytes=bound)


# ----- fingerprints -----
SPECS = ["word:3", "word:1", "char:5"]


def copies() -> list[tuple[str, str]]:
    out = [(f"U+{ord(m):04X} in every word", in_every_word(ORIGINAL, m)) for m in INVISIBLE]
    out += [
        ("every word isolated right-to-left", wrapped(ORIGINAL, RLI, PDI)),
        ("every word overridden right-to-left", wrapped(ORIGINAL, RLO, PDF)),
        ("every word embedded left-to-right", wrapped(ORIGINAL, LRE, PDF)),
        ("a mark after every letter", "".join(c + (ZWJ if c.isalpha() else "") for c in ORIGINAL)),
        (
            "all of them mixed",
            " ".join(
                w[:1] + INVISIBLE[i % len(INVISIBLE)] + w[1:] for i, w in enumerate(ORIGINAL.split(" "))
            ),
        ),
    ]
    return out


@pytest.mark.parametrize("minhash", ["oph", "classic"])
@pytest.mark.parametrize("shingle", SPECS)
def test_copies_with_invisible_characters_have_the_original_fingerprint(shingle: str, minhash: str) -> None:
    fpr = Fingerprinter(IndexSpec(shingle, 64, 5, 16, 4, minhash))
    names, texts = zip(*copies(), strict=True)
    original, *fps = fpr.compute([ORIGINAL, *texts])
    for name, fp in zip(names, fps, strict=True):
        assert np.array_equal(fp.signature, original.signature), name
        assert np.array_equal(fp.shingles, original.shingles), name
        assert fp.n_units == original.n_units and fp.tail == original.tail, name
    # one by one too (a batch of one non-ASCII text), and as a short document (its 64-bit hashes)
    for text in texts[:5]:
        assert np.array_equal(fpr.compute([text])[0].signature, original.signature)
    short = fpr.compute(["tiny copy", in_every_word("tiny copy", SHY)])
    assert short[0].hashes is not None and np.array_equal(short[0].hashes, short[1].hashes)


@pytest.mark.parametrize("shingle", SPECS)
def test_an_append_with_invisible_characters_equals_the_clean_append(shingle: str) -> None:
    fpr = Fingerprinter(IndexSpec(shingle, 64, 5, 16, 4))
    head, tail = ORIGINAL[:60], ORIGINAL[60:]
    clean = fpr.compute([AppendTo(fpr.compute([head])[0], tail)])[0]
    marked_head = fpr.compute([in_every_word(head, ZWSP)])[0]
    marked = fpr.compute([AppendTo(marked_head, in_every_word(tail, CGJ))])[0]
    assert np.array_equal(marked.signature, clean.signature)
    assert np.array_equal(marked.shingles, clean.shingles)


# ----- texts without them: the same hashes and signatures as before -----
# The digest below was computed by the code before default-ignorables were dropped (normalisation
# version 1): texts without them must keep their shingle hashes and signatures, so that an index's
# copies without them keep matching (and the stored signatures of such texts stay what they were).
UNCHANGED = [
    ORIGINAL,
    "",
    "   ",
    "!!!",
    "one",
    "ΣΑΣ ΟΔΟΣ όσος",
    "İstanbul İİ i̇",
    "ﬁne ＡＢＣ Ⅻ ㎏ KELVIN \u212a",
    "e\u0301 \u0301start Ünïcode wörds",
    "emoji 😀 ok 𝔘𝔫𝔦 中文 字 日本語のテキスト",
    "a\ud800b c under_score 42 x²",
    "tab\tsep\r\nline \u3000\xa0 spaces",
    "\n".join(f"line {i} with ünïcode on some lines" if i % 7 == 0 else f"line {i}" for i in range(900)),
]
UNCHANGED_DIGEST = "59dbf4fc18911257bc27f0b2dd1423f7255d05eb70d3b6d1ed8c2aedbbf8911c"


def digest_of(texts: list[str]) -> str:
    h = hashlib.sha256()
    for shingle in ("word:3", "word:1", "char:5"):
        sh = Shingler(ShingleSpec.parse(shingle))
        batch = sh.batch(texts)
        h.update(
            batch.hashes.tobytes()
            + batch.offsets.tobytes()
            + "\0".join(batch.tails).encode("utf-8", "surrogatepass")
        )
        for minhash in ("oph", "classic"):
            fps = Fingerprinter(IndexSpec(shingle, 64, 5, 16, 4, minhash)).compute(texts)
            for fp in fps:
                h.update(fp.signature.tobytes() + fp.shingles.tobytes())
    return h.hexdigest()


def test_texts_without_them_keep_their_hashes_and_signatures() -> None:
    assert not any(normalization.has_ignorable(t) for t in UNCHANGED)
    assert digest_of(UNCHANGED) == UNCHANGED_DIGEST


# ----- the version in the spec -----
def stored_by_an_old_version(spec: IndexSpec) -> str:
    """``spec`` as a version before the normalisation had one stored it: without the field."""
    stored = json.loads(spec.to_json())
    stored.pop("normalization", None)
    return json.dumps(stored, sort_keys=True)


OLD_SPEC = stored_by_an_old_version(IndexSpec("word:3", 64, 5, 16, 4))


def test_a_spec_records_the_normalisation() -> None:
    spec = IndexSpec("word:3", 64, 5, 16, 4)
    assert spec.normalization == NORMALIZATION == 2
    assert '"normalization": 2' in spec.to_json() and IndexSpec.from_json(spec.to_json()) == spec
    old = IndexSpec.from_json(OLD_SPEC)  # stored by a version before the normalisation had one
    assert old.normalization == 1 and old.differences(spec) == [("normalization", 1, 2)]


def test_an_index_normalised_otherwise_is_refused_naming_the_rebuild() -> None:
    spec, old = IndexSpec("word:3", 64, 5, 16, 4), IndexSpec.from_json(OLD_SPEC)
    with pytest.raises(ParameterMismatchError) as caught:
        spec.require_same(old, "dedupd")
    message = str(caught.value)
    assert "normalization" in message and "version 1" in message and "version 2" in message
    assert "Run `dedupd rebuild` to reindex" in message and "Start with" not in message  # no flag helps
    older = IndexSpec.from_json(stored_by_an_old_version(IndexSpec("word:3", 128, 5, 32, 4)))
    with pytest.raises(
        ParameterMismatchError, match="Run `dedupd rebuild --num-perm 64 --bands 16 --rows 4`"
    ):
        spec.require_same(older, "dedupd")


def test_a_rebuild_moves_the_normalisation_and_reshingles() -> None:
    old = IndexSpec.from_json(OLD_SPEC)
    target = load_settings().rebuild_target(old)  # no flag given
    assert target.normalization == NORMALIZATION and old.describe_changes(target) == "normalization 1 -> 2"
    assert not rebands_only(old, target)  # the texts are reshingled, not the signatures re-banded
    assert rebands_only(target, target.with_changes({"bands": 8, "rows": 8}))
    current = IndexSpec.from_json(target.to_json())
    assert load_settings().rebuild_target(current) == current  # nothing to rebuild
