"""The family generator of scripts/family_shapes.py: each shape's truth has the shape it claims, checked by brute
force with the package's own shingling (pure, no Redis)."""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from itertools import combinations, pairwise

import pytest
from helpers import load_script

from dedupd.similarity.shingling import Shingler
from dedupd.similarity.spec import ShingleSpec

shapes = load_script("family_shapes")
SHINGLER = Shingler(ShingleSpec.parse("word:3"))
THRESHOLDS = ["0.8", "0.5", "0.9"]


def jaccard(a: str, b: str) -> Fraction:
    """Exact Jaccard of two texts' word 3-shingle sets, by brute force."""
    x, y = set(SHINGLER.hash_set(a).tolist()), set(SHINGLER.hash_set(b).tolist())
    return Fraction(len(x & y), len(x | y))


def families(shape: str, threshold: str, docs: int = 90, seed: int = 5) -> list:  # type: ignore[type-arg]
    return [f for f in shapes.generate(shape, docs, seed, threshold) if f.shape == shape]


def each_family(shape: str, threshold: str, check: Callable[[list[str], Fraction], None]) -> None:
    """``check`` on the texts (base first) of every family of a small instance of the shape."""
    fams = families(shape, threshold)
    assert fams, f"no {shape} family in 90 documents"
    for fam in fams:
        check([d.text for d in fam.docs], Fraction(threshold))


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_star_variants_are_above_to_the_base_and_below_to_one_another(threshold: str) -> None:
    """A star: each variant at or above the threshold to the base, every two variants below it."""

    def check(texts: list[str], t: Fraction) -> None:
        base, variants = texts[0], texts[1:]
        assert len(variants) >= 3
        assert all(jaccard(base, v) >= t for v in variants)
        assert all(jaccard(a, b) < t for a, b in combinations(variants, 2))

    each_family("star", threshold, check)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_hub_is_above_to_each_spoke_and_spokes_below_to_one_another(threshold: str) -> None:
    """A hub: the hub (the family's base) at or above the threshold to every spoke, the spokes pairwise below
    (each spoke its own cluster until the hub comes)."""

    def check(texts: list[str], t: Fraction) -> None:
        hub, spokes = texts[0], texts[1:]
        assert len(spokes) >= 3
        assert all(jaccard(hub, s) >= t for s in spokes)
        assert all(jaccard(a, b) < t for a, b in combinations(spokes, 2))

    each_family("hub", threshold, check)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_chain_versions_are_above_to_the_previous_and_the_ends_below(threshold: str) -> None:
    """A chain: each version at or above the threshold to the one before, the first and the last below."""

    def check(texts: list[str], t: Fraction) -> None:
        assert len(texts) >= 3
        assert all(jaccard(a, b) >= t for a, b in pairwise(texts))
        assert jaccard(texts[0], texts[-1]) < t

    each_family("chain", threshold, check)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_flood_copies_are_above_to_the_original(threshold: str) -> None:
    """A flood: every copy at or above the threshold to the original, most of them edited (not identical)."""

    def check(texts: list[str], t: Fraction) -> None:
        original, copies = texts[0], texts[1:]
        assert all(jaccard(original, c) >= t for c in copies)
        assert sum(c != original for c in copies) > len(copies) // 2

    each_family("flood", threshold, check)


@pytest.mark.parametrize("threshold", THRESHOLDS)
def test_template_instances_share_the_boilerplate_and_straddle_the_threshold(threshold: str) -> None:
    """A template: instances share a header and a footer around a unique middle; some pairs are above the
    threshold (the base and the first instance) and some below (the base and the second)."""

    def check(texts: list[str], t: Fraction) -> None:
        words = [x.split() for x in texts]
        head = min(len(w) for w in words)
        common_start = next(i for i in range(head) if len({w[i] for w in words}) > 1)
        common_end = next(i for i in range(1, head) if len({w[-i] for w in words}) > 1) - 1
        assert common_start >= 8 and common_end >= 8
        assert jaccard(texts[0], texts[1]) >= t > jaccard(texts[0], texts[2])

    each_family("template", threshold, check)


@pytest.mark.parametrize("shape", shapes.SHAPES)
def test_families_share_nothing_and_fillers_make_up_the_count(shape: str) -> None:
    """Exactly ``docs`` documents with distinct ids; no two families have a pair at 0.5 or above (so the truth
    is the families' own); the fillers are below it to everything."""
    fams = shapes.generate(shape, 97, 3, "0.8")
    docs = [(f.index, d) for f in fams for d in f.docs]
    assert len(docs) == 97 and len({d.id for _, d in docs}) == 97
    for (fa, a), (fb, b) in combinations(docs, 2):
        if fa != fb:
            assert jaccard(a.text, b.text) < Fraction(1, 2), (a.id, b.id)


def test_the_same_seed_gives_the_same_documents() -> None:
    """Fixed seeds: the same arguments give the same texts; another seed or threshold, others."""
    again = [d.text for f in shapes.generate("hub", 60, 7) for d in f.docs]
    assert again == [d.text for f in shapes.generate("hub", 60, 7) for d in f.docs]
    assert again != [d.text for f in shapes.generate("hub", 60, 8) for d in f.docs]
    assert again != [d.text for f in shapes.generate("hub", 60, 7, "0.7") for d in f.docs]


def test_orders_are_permutations_with_the_base_where_they_say() -> None:
    """Every order holds every document once; first puts each family's base first, last puts it last,
    interleaved starts with every family's base, shuffled is a fixed-seed permutation of them."""
    fams = shapes.generate("star", 150, 2)
    ids = sorted(d.id for f in fams for d in f.docs)
    by_order = {o: [d.id for d in shapes.ordered(fams, o, 2)] for o in shapes.ORDERS}
    for got in by_order.values():
        assert sorted(got) == ids
    for fam in fams:
        members = [d.id for d in fam.docs]
        first = [x for x in by_order["first"] if x in members]
        last = [x for x in by_order["last"] if x in members]
        assert first[0] == fam.docs[0].id and last[-1] == fam.docs[0].id
    assert by_order["interleaved"][: len(fams)] == [f.docs[0].id for f in fams]
    assert by_order["shuffled"] == [d.id for d in shapes.ordered(fams, "shuffled", 2)]
    assert by_order["shuffled"] != by_order["first"]


def test_unknown_shape_order_and_threshold_are_refused() -> None:
    """Misuse is a ValueError that names the choices."""
    with pytest.raises(ValueError, match="one of flood"):
        shapes.generate("ring", 10)
    with pytest.raises(ValueError, match="one of first"):
        shapes.ordered([], "backwards")
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        shapes.generate("star", 10, threshold="1")
