"""Families of near-duplicate documents in the shapes real corpora have, with exact truth (pure, no Redis).

Used by ``scripts/families.py`` (which writes them and runs them through ``dedupd serve``) and by
``tests/test_families.py``. Every text is made of random pseudo-words (4 to 9 letters), so two families
share no word 3-shingle; within a family the edits are sized from the threshold ``t`` so that each shape
holds by construction, and each family is checked against its claim with the package's own shingles
(exact Jaccard, :func:`claim_breaks`) before it is kept. With ``s`` the word 3-shingles of a text of ``n``
distinct words (``s = n - 2``) and ``q = s (1 - t) / t``:

- **flood**: an original and copies, each with ``e`` of its words replaced (``0 <= e <= r``,
  ``r = floor(s (1 - t) / (3 (1 + t)))``: a replaced word changes at most 3 shingles, so each copy is at
  ``J >= (s - 3e) / (s + 3e) >= t`` to the original). Claim: every copy >= t to the original.
- **star**: a base and variants, each the base with ``k`` words of its own added at the start or the end
  (``q/2 < k <= q``): ``J = s / (s + k) >= t`` to the base, ``s / (s + k_i + k_j) < t`` to one another
  (Debian's ``libstdc++-12-pic`` and its 39 cross variants: 7/8 and 7/9). Claim: each variant >= t to the
  base, the variants pairwise < t.
- **hub**: spokes, each a common stem with ``k_i`` words of its own at the end, and the hub: the stem with
  ``k_h < k_i`` of its own (``k_h + k_i <= q < k_i + k_j``; Debian's 40 ``OTB<module>`` descriptions and
  ``otb-qgis``). Claim: the hub >= t to each spoke, the spokes pairwise < t. The hub is the family's
  base: the natural order (spokes first, the hub after) is ``last``.
- **chain**: a story that drifts: each version replaces ``r`` words of the one before (positions never
  replaced before, 3 or more apart: exactly ``3r`` shingles change, ``J = (s - 3r) / (s + 3r) >= t``).
  Claim: consecutive versions >= t, the first and the last < t.
- **template**: shared boilerplate (a header and a footer) around a unique middle of ``u_i`` words:
  ``J = S / (S + u_i + u_j + 4)`` with ``S`` the boilerplate's shingles, so some pairs are above the
  threshold and some below. The base has ``u = 1``, the first other instance too (above it), the second
  the longest middle (below it). Claim: exactly that.

A family is its base first, then the others in the order they were made. The orders a shape's families
are written in (:func:`ordered`): ``first`` (family after family, each base first), ``last`` (each base
last), ``interleaved`` (round robin over the families, each base first: a family's documents spread over
many batches) and ``shuffled`` (a fixed-seed permutation of all the documents). Documents left over when
the next family would not fit are fillers: unique texts of their own.

    >>> fams = generate("star", 12, seed=1)
    >>> [len(f.docs) for f in fams], fams[0].docs[0].id, fams[0].docs[0].role
    ([12], 'star0000-base', 'base')
"""

from __future__ import annotations

import math
import random
import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from itertools import combinations

from dedupd.similarity.shingling import Shingler
from dedupd.similarity.spec import ShingleSpec

SHAPES = ("flood", "star", "hub", "chain", "template")
ORDERS = ("first", "last", "interleaved", "shuffled")
#: documents per family of each shape (base included), drawn uniformly, clipped to what is left
FAMILY_SIZES: dict[str, tuple[int, int]] = {
    "flood": (10, 400),
    "star": (4, 60),
    "hub": (4, 100),
    "chain": (3, 30),
    "template": (4, 60),
}
ATTEMPTS = 20  # draws of one family before the generator gives up (never needed but for word collisions)
SHINGLE = ShingleSpec("word", 3)  # the shapes are sized for word 3-shingles


@dataclass(frozen=True, slots=True)
class Doc:
    """One document: its id, its text and its part in its family."""

    id: str
    text: str
    role: str  # base, copy, variant, spoke, version, instance, filler


@dataclass(frozen=True, slots=True)
class Family:
    """The documents of one family, base first, then the others in the order they were made."""

    shape: str
    index: int
    docs: tuple[Doc, ...]


Texts = list[tuple[str, str]]  # (role, text), base first


def _word(rng: random.Random) -> str:
    return "".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9)))


def _words(rng: random.Random, n: int) -> list[str]:
    return [_word(rng) for _ in range(n)]


def _text(words: Sequence[str]) -> str:
    return " ".join(words)


def min_words(shape: str, t: Fraction) -> int:
    """The fewest words a family's base can have for the shape's edits to exist at threshold ``t``.

    >>> [min_words(s, Fraction(4, 5)) for s in SHAPES]
    [29, 6, 7, 29, 30]
    """
    if shape in ("flood", "chain"):  # one replaced word (3 shingles) keeps J >= t: s >= 3 (1 + t) / (1 - t)
        return math.ceil(3 * (1 + t) / (1 - t)) + 2
    if shape == "star":  # q >= 1: s >= t / (1 - t)
        return max(6, math.ceil(t / (1 - t)) + 2)
    if shape == "hub":  # the stem (n - 1 words) with q >= 1
        return max(6, math.ceil(t / (1 - t)) + 2) + 1
    # template: q >= 6 (two one-word middles above each other): S >= 6 t / (1 - t), S = h + f - 4
    return max(30, math.ceil(6 * t / (1 - t)) + 4)


def _q(s: int, t: Fraction) -> Fraction:
    return s * (1 - t) / t


def _edit_words(s: int, t: Fraction) -> int:
    """``r``: the most words a copy or a version may replace (each changes at most 3 shingles)."""
    return max(1, math.floor(s * (1 - t) / (3 * (1 + t))))


def flood(rng: random.Random, t: Fraction, size: int) -> Texts:
    """An original and ``size - 1`` copies with at most ``r`` words replaced (a tenth are exact copies)."""
    n = rng.randint(min_words("flood", t), min_words("flood", t) + 90)
    base = _words(rng, n)
    r = _edit_words(n - 2, t)
    out: Texts = [("base", _text(base))]
    for _ in range(size - 1):
        copy = list(base)
        for p in rng.sample(range(n), 0 if rng.random() < 0.1 else rng.randint(1, r)):
            copy[p] = _word(rng)
        out.append(("copy", _text(copy)))
    return out


def _extra_words(q: Fraction) -> tuple[int, int]:
    """The range of ``k`` with ``q/2 < k <= q``."""
    return math.floor(q / 2) + 1, math.floor(q)


def star(rng: random.Random, t: Fraction, size: int) -> Texts:
    """A base and ``size - 1`` variants, each with ``k`` words of its own at its start or its end."""
    n = rng.randint(min_words("star", t), min_words("star", t) + 70)
    base = _words(rng, n)
    lo, hi = _extra_words(_q(n - 2, t))
    out: Texts = [("base", _text(base))]
    for _ in range(size - 1):
        own = _words(rng, rng.randint(lo, hi))
        out.append(("variant", _text(own + base if rng.random() < 0.5 else base + own)))
    return out


def hub(rng: random.Random, t: Fraction, size: int) -> Texts:
    """The hub (base) and ``size - 1`` spokes: a stem, each spoke with ``k_i`` words of its own at the end,
    the hub with ``k_h`` (``k_h + k_i <= q < k_i + k_j``)."""
    n = rng.randint(min_words("hub", t), min_words("hub", t) + 70)
    stem = _words(rng, n - 1)
    lo, hi = _extra_words(_q(n - 3, t))
    k_hub = rng.randint(0, hi - lo)
    out: Texts = [("base", _text(stem + _words(rng, k_hub)))]
    for _ in range(size - 1):
        out.append(("spoke", _text(stem + _words(rng, rng.randint(lo, hi - k_hub)))))
    return out


def chain(rng: random.Random, t: Fraction, size: int) -> Texts:
    """``size`` versions, each with ``r`` words of the one before replaced (never the same position twice,
    positions of one step 3 or more apart, none in the first or last two words). ``r`` is the least that
    takes the last version below ``t`` from the first even if the replaced words were all adjacent (``r L``
    changed shingles or more, ``L = size - 1``), at most what keeps consecutive versions at or above it."""
    n = rng.randint(min_words("chain", t), min_words("chain", t) + 90)
    steps = max(1, size - 1)
    while True:
        drift = (n - 2) * (1 - t) / (1 + t)  # changed shingles that take J below t
        r = min(_edit_words(n - 2, t), math.floor(drift / steps) + 1)
        if r * steps <= (n - 4) // 2:  # room for every step's positions, spaced
            break
        n += 5
    words = _words(rng, n)
    free = list(range(2, n - 2))
    out: Texts = [("base", _text(words))]
    for _ in range(size - 1):
        rng.shuffle(free)
        taken: list[int] = []
        for p in free:
            if len(taken) < r and all(abs(p - o) >= 3 for o in taken):
                taken.append(p)
        free = [p for p in free if p not in taken]
        words = list(words)
        for p in taken:
            words[p] = _word(rng)
        out.append(("version", _text(words)))
    return out


def template(rng: random.Random, t: Fraction, size: int) -> Texts:
    """``size`` instances of one boilerplate (header + footer) around a unique middle of ``u`` words."""
    total = rng.randint(min_words("template", t), min_words("template", t) + 70)
    h = rng.randint(8, total - 8)
    header, footer = _words(rng, h), _words(rng, total - h)
    top = max(1, math.floor(_q(total - 4, t)) - 4)  # u_i + u_j + 4 <= q: above
    middles = [1, 1, top, *(rng.randint(1, top) for _ in range(size - 3))][:size]
    roles = ["base", *["instance"] * (size - 1)]
    return [(role, _text(header + _words(rng, u) + footer)) for role, u in zip(roles, middles, strict=True)]


MAKERS: dict[str, Callable[[random.Random, Fraction, int], Texts]] = {
    "flood": flood,
    "star": star,
    "hub": hub,
    "chain": chain,
    "template": template,
}


def shingle_sets(texts: Sequence[str]) -> list[frozenset[int]]:
    """Each text's distinct word 3-shingle hashes, by the package's own shingling."""
    sh = Shingler(SHINGLE)
    return [frozenset(int(h) for h in sh.hash_set(text).tolist()) for text in texts]


def above(a: frozenset[int], b: frozenset[int], t: Fraction) -> bool:
    """Whether the exact Jaccard of ``a`` and ``b`` is at or above ``t``."""
    inter = len(a & b)
    return inter * t.denominator >= t.numerator * (len(a) + len(b) - inter)


def claim_breaks(shape: str, sets: Sequence[frozenset[int]], t: Fraction) -> list[str]:
    """What a family's shingle sets (base first) break of its shape's claim (empty: the claim holds).

    >>> claim_breaks("chain", [frozenset({1, 2}), frozenset({1, 2, 3}), frozenset({5})], Fraction(1, 2))
    ['versions 1 and 2 below t']
    """
    base, rest = sets[0], sets[1:]
    out: list[str] = []
    if shape in ("flood", "star", "hub"):
        out += [f"{i} below t to the base" for i, s in enumerate(rest, 1) if not above(base, s, t)]
    if shape in ("star", "hub"):
        out += [
            f"{i + 1} and {j + 1} above t"
            for (i, a), (j, b) in combinations(enumerate(rest), 2)
            if above(a, b, t)
        ]
    if shape == "chain":
        out += [
            f"versions {i} and {i + 1} below t"
            for i in range(len(sets) - 1)
            if not above(sets[i], sets[i + 1], t)
        ]
        if len(sets) > 2 and above(sets[0], sets[-1], t):
            out.append("first and last above t")
    if shape == "template":
        if len(sets) > 1 and not above(base, sets[1], t):
            out.append("base and 1 below t")
        if len(sets) > 2 and above(base, sets[2], t):
            out.append("base and 2 above t")
    return out


def family(rng: random.Random, shape: str, index: int, size: int, t: Fraction) -> Family:
    """One family of ``size`` documents whose shingle sets hold the shape's claim (its id tag the shape and
    ``index``), drawn from ``rng``.

    Raises:
        RuntimeError: no draw held the claim (word collisions, never seen).
    """
    for _ in range(ATTEMPTS):
        texts = MAKERS[shape](rng, t, size)
        if not claim_breaks(shape, shingle_sets([text for _, text in texts]), t):
            break
    else:
        raise RuntimeError(f"no {shape} family of {size} held its claim in {ATTEMPTS} draws")
    tag = f"{shape}{index:04d}"
    counts: dict[str, int] = {}
    docs = []
    for role, text in texts:
        n = counts[role] = counts.get(role, -1) + 1
        docs.append(Doc(f"{tag}-base" if role == "base" else f"{tag}-{role}{n:04d}", text, role))
    return Family(shape, index, tuple(docs))


def generate(shape: str, docs: int, seed: int = 28, threshold: Fraction | str = "0.8") -> list[Family]:
    """``docs`` documents of one shape: families of the shape's sizes (``FAMILY_SIZES``) while the next
    fits, then fillers (each a family of its own, shape ``filler``). The same arguments, the same texts.

    Raises:
        ValueError: an unknown shape, or a threshold outside (0, 1).
    """
    if shape not in MAKERS:
        raise ValueError(f"unknown shape {shape!r}: one of {', '.join(SHAPES)}")
    t = Fraction(str(threshold)) if isinstance(threshold, str) else threshold
    if not 0 < t < 1:
        raise ValueError(f"threshold must be in (0, 1), got {threshold}")
    rng = random.Random(f"{seed}:{shape}:{t}")
    lo, hi = FAMILY_SIZES[shape]
    out: list[Family] = []
    left = docs
    while left >= lo:
        size = min(rng.randint(lo, hi), left)
        out.append(family(rng, shape, len(out), size, t))
        left -= size
    for i in range(left):
        text = _text(_words(rng, rng.randint(8, 80)))
        out.append(Family("filler", len(out), (Doc(f"filler{i:04d}", text, "filler"),)))
    return out


def ordered(families: Sequence[Family], order: str, seed: int = 28) -> list[Doc]:
    """The documents of ``families`` in one of ``ORDERS`` (see the module's docstring).

    >>> fams = [Family("x", 0, (Doc("a", "", "base"), Doc("b", "", "copy"))), Family("x", 1, (Doc("c", "", "base"),))]
    >>> [[d.id for d in ordered(fams, o)] for o in ("first", "last", "interleaved")]
    [['a', 'b', 'c'], ['b', 'a', 'c'], ['a', 'c', 'b']]
    """
    if order == "first":
        return [d for f in families for d in f.docs]
    if order == "last":
        return [d for f in families for d in (*f.docs[1:], f.docs[0])]
    if order == "interleaved":
        longest = max((len(f.docs) for f in families), default=0)
        return [f.docs[k] for k in range(longest) for f in families if k < len(f.docs)]
    if order == "shuffled":
        docs = [d for f in families for d in f.docs]
        random.Random(f"{seed}:shuffled").shuffle(docs)
        return docs
    raise ValueError(f"unknown order {order!r}: one of {', '.join(ORDERS)}")
