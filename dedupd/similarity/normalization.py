"""Text normalisation before shingling, and its version (pure: no numpy, no Redis).

A text is normalised in this order: default-ignorable code points dropped, Unicode NFKC, lowercase,
whitespace runs collapsed (:func:`dedupd.similarity.shingling.normalize`; the word kernel lowercases and
splits words itself, and its table marks the default-ignorable code points, so that only the texts that
hold some are searched for them). This module holds the first two steps, which every path shares: the word
kernel's input, char shingling, appends and the input bound on a text's normalised size (``Entry.size``).

Default-ignorable code points are invisible: zero-width spaces and joiners, the soft hyphen, the combining
grapheme joiner, bidi controls, variation selectors, tags. One of them inside every word of a copy made
every word differ from the original's: they are dropped, so a copy with them compares as the text
without them. They go before NFKC, so that one between a letter and its combining accent does not stop
the two from composing (``"e\\u034f\\u0301"`` is ``"\\u00e9"``); NFKC makes no default-ignorable code point of
any other (tests/test_normalization.py checks every code point).

The index records :data:`NORMALIZATION` in its spec (:class:`dedupd.similarity.spec.IndexSpec`): an index
whose signatures were computed under another normalisation is refused until ``dedupd rebuild``
reshingles its texts.

>>> nfkc("co\\u200bpy \\ufb01\\u00adne")  # a zero-width space, a ligature, a soft hyphen
'copy fine'
"""

from __future__ import annotations

import re
import unicodedata

#: The version of the normalisation: 1 was NFKC, lowercase, whitespace collapsed (an index spec stored
#: without a version has it); 2 drops the default-ignorable code points first.
NORMALIZATION = 2
#: The version of a stored index spec that records none (stored before the version was).
UNVERSIONED = 1
#: What each version changed, for the message that refuses an index built under an older one.
CHANGES = {2: "it drops default-ignorable characters such as zero-width spaces and soft hyphens"}

#: Unicode's Default_Ignorable_Code_Point property as inclusive ranges, from DerivedCoreProperties.txt
#: (https://www.unicode.org/Public/UCD/latest/ucd/DerivedCoreProperties.txt; Python's unicodedata does not
#: expose the property: tests/test_normalization.py checks the table against what it is derived from). It
#: includes unassigned code points reserved as default-ignorable (U+2065, U+FFF0-FFF8, U+E0000-E0FFF but
#: the tags and variation selectors).
DEFAULT_IGNORABLE: tuple[tuple[int, int], ...] = (
    (0x00AD, 0x00AD),  # SOFT HYPHEN
    (0x034F, 0x034F),  # COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),  # ARABIC LETTER MARK
    (0x115F, 0x1160),  # HANGUL CHOSEONG FILLER, HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),  # KHMER VOWEL INHERENT AQ, AA
    (0x180B, 0x180F),  # MONGOLIAN FREE VARIATION SELECTORS, MONGOLIAN VOWEL SEPARATOR
    (0x200B, 0x200F),  # ZERO WIDTH SPACE, ZERO WIDTH NON-JOINER, ZERO WIDTH JOINER, LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides (LRE, RLE, PDF, LRO, RLO)
    (0x2060, 0x206F),  # WORD JOINER, invisible operators, bidi isolates (LRI, RLI, FSI, PDI), deprecated
    (0x3164, 0x3164),  # HANGUL FILLER
    (0xFE00, 0xFE0F),  # VARIATION SELECTOR-1..16
    (0xFEFF, 0xFEFF),  # ZERO WIDTH NO-BREAK SPACE (byte order mark)
    (0xFFA0, 0xFFA0),  # HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),  # reserved
    (0x1BCA0, 0x1BCA3),  # SHORTHAND FORMAT controls
    (0x1D173, 0x1D17A),  # MUSICAL SYMBOL BEGIN BEAM..END PHRASE
    (0xE0000, 0xE0FFF),  # tags (LANGUAGE TAG, TAG SPACE..CANCEL TAG), VARIATION SELECTOR-17..256, reserved
)

# runs of them: a text made of them (an adversary's) is dropped a run at a time
_IGNORABLE_RE = re.compile("[" + "".join(f"{chr(a)}-{chr(b)}" for a, b in DEFAULT_IGNORABLE) + "]+")


def is_ignorable(cp: int) -> bool:
    """Whether code point ``cp`` is default-ignorable.

    >>> is_ignorable(0x200B), is_ignorable(ord("a"))
    (True, False)
    """
    return any(a <= cp <= b for a, b in DEFAULT_IGNORABLE)


def has_ignorable(text: str) -> bool:
    """Whether ``text`` holds a default-ignorable code point (never an ASCII text)."""
    return not text.isascii() and _IGNORABLE_RE.search(text) is not None


def drop_ignorable(text: str) -> str:
    """``text`` without its default-ignorable code points (``text`` itself when it has none)."""
    return _IGNORABLE_RE.sub("", text) if has_ignorable(text) else text


def nfkc(text: str) -> str:
    """``text`` without its default-ignorable code points, then in Unicode NFKC (not lowercased)."""
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", drop_ignorable(text))


def normalized_bytes(text: str, raw_bytes: int, limit: int | None = None) -> int:
    """The UTF-8 size of ``text`` (``raw_bytes`` long) once normalised (:func:`nfkc`), or more: its size in
    NFKC, default-ignorable code points counted (searching every text for them would cost more than
    the rest of reading it, and dropping them makes no text longer), and exactly when that is more than
    ``limit``. What fingerprinting the text takes, and what ``max_normalized_bytes`` bounds.

    >>> normalized_bytes("\\ufdfa", 3), normalized_bytes("a\\u200bb", 5), normalized_bytes("a\\u200bb", 5, limit=4)
    (33, 5, 2)
    """
    if text.isascii():
        return raw_bytes
    size = raw_bytes
    if not unicodedata.is_normalized("NFKC", text):
        size = len(unicodedata.normalize("NFKC", text).encode("utf-8", "surrogatepass"))
    if limit is not None and size > limit and has_ignorable(text):
        size = len(nfkc(text).encode("utf-8", "surrogatepass"))
    return size
