"""Bounded work against a brute-force oracle (issue 28, item 3).

Small instances (one to six families of scripts/family_shapes.py's shapes, mixed, up to ~150 documents) go
through the daemon's processing in an order hypothesis draws, in batches of 1 to 8, with small bounds, so
that the bounds bind: crowded buckets that refuse joins, evictions, hubs that merge clusters. The oracle is
exact Jaccard on the package's own word 3-shingles (scripts/oracle.py); the daemon verifies exactly, so an
alert's pair is exactly a pair at or above the threshold. Asserted, per instance:

- every pair an alert reports (the alerting document and each of its matches) is a true pair, at its exact
  similarity;
- every document with a true duplicate is named by some alert (as the alerting document or a match);
- the alert graph's components (two or more members) are the truth graph's.

The instances run through a Processor on the in-memory twin of the Lua scripts (index/memory.py) and, fewer
and smaller, through a daemon on the real redis-server (the scripts themselves, and the twin's alerts
against theirs).

Where this holds today: each family in the order it was made (its base first), families interleaved at
random, with every bound small; and any order with the default room in buckets, candidates and
representatives. Where it does not (the xfail tests; the cases are shrunk by hypothesis): any order with
crowded buckets (a document refused by every bucket it shares with its later duplicates, all full of other
clusters' members, joins only buckets no duplicate reads); and any order with few candidates or
representatives (the duplicate is read but outranked, or evicted and not among the representatives).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, cast

import pytest
import redis
from helpers import alerts, drain, load_script, make_daemon, push, raw_entry
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from dedupd.daemon.processor import Processor
from dedupd.index.buckets import Evictions
from dedupd.index.keys import Keys
from dedupd.index.memory import MemoryExchange, MemoryGateway
from dedupd.index.protocol import Applied, Exchange, Prepared
from dedupd.settings import load_settings

shapes = load_script("family_shapes")
oracle = load_script("oracle")
metrics = load_script("cluster_metrics")

T = "0.8"
#: documents per family of each shape in these instances (base included)
SIZES = {
    "flood": (2, 40),
    "star": (3, 40),
    "hub": (3, 40),
    "chain": (3, 12),
    "template": (3, 24),
    "filler": (1, 1),
}
KINDS = (*shapes.SHAPES, "filler")
Doc = tuple[str, str]  # (id, text)
Pair = frozenset[str]
Family = tuple[str, int, int]  # (shape, documents, seed)
Alert = dict[str, Any]


# ----------------------------------------------------------------------------- instances
def family_docs(family: Family, index: int) -> list[Doc]:
    """One family (base first, then the others in the order they were made), or one filler document, its ids
    tagged with ``index``; its texts depend on the family alone (an instance's families have distinct seeds:
    two of them share no shingle)."""
    shape, size, seed = family
    rng = random.Random(f"{shape}:{size}:{seed}")
    if shape == "filler":
        return [(f"filler{index:04d}", " ".join(shapes._words(rng, rng.randint(8, 80))))]
    fam = shapes.family(rng, shape, index, size, Fraction(T))
    return [(d.id, d.text) for d in fam.docs]


@dataclass(frozen=True)
class Instance:
    """Families, the order their documents are pushed in (positions in the families' documents, family after
    family), and the settings they run with (bounds and batch size): short enough to read and replay."""

    families: tuple[Family, ...]
    order: tuple[int, ...]
    bounds: dict[str, int] = field(default_factory=dict)
    batch_size: int = 1

    @property
    def docs(self) -> list[Doc]:
        """The documents in stream order."""
        made = [d for k, fam in enumerate(self.families) for d in family_docs(fam, k)]
        assert sorted(self.order) == list(range(len(made))), "order is not a permutation of the documents"
        return [made[i] for i in self.order]


def families(
    kinds: Sequence[str] = KINDS, most: int = 6, largest: int = 40
) -> st.SearchStrategy[tuple[Family, ...]]:
    """One to ``most`` families of the shapes ``kinds`` (fillers: one document), each of a drawn size (at
    most ``largest``) and seed."""

    def one(shape: str) -> st.SearchStrategy[Family]:
        lo, hi = SIZES[shape]
        return st.tuples(st.just(shape), st.integers(lo, min(hi, max(lo, largest))), st.integers(0, 2**16))

    family = st.sampled_from(kinds).flatmap(one)
    return st.lists(family, min_size=1, max_size=most, unique_by=lambda f: f[2]).map(tuple)


def sizes(fams: Sequence[Family]) -> list[int]:
    return [size for _, size, _ in fams]


#: small bounds (settings; max_clusters is at least 64, which these instances never reach)
SMALL = {
    "bucket_members": st.integers(4, 8),
    "max_candidates": st.integers(1, 16),
    "max_matches": st.integers(1, 5),
    "representatives": st.integers(1, 8),
    "near_miss_clusters": st.integers(1, 4),
    "near_miss_members": st.integers(0, 8),
    "max_clusters": st.just(64),
}
#: the defaults of the bounds that decide what is found (bucket room, candidates, representatives)
ROOM = {
    "bucket_members": st.just(32),
    "max_candidates": st.just(64),
    "representatives": st.just(8),
    "near_miss_clusters": st.just(4),
}
BATCHES = st.integers(1, 8)


def bounds(**fixed: st.SearchStrategy[int]) -> st.SearchStrategy[dict[str, int]]:
    """The small bounds, some of them replaced."""
    return st.fixed_dictionaries({**SMALL, **fixed})


@st.composite
def any_order(draw: st.DrawFn, fams: st.SearchStrategy[tuple[Family, ...]], room: Any) -> Instance:
    """Families in any order (a permutation of all their documents), with bounds ``room``."""
    got = draw(fams)
    order = draw(st.permutations(range(sum(sizes(got)))))
    return Instance(got, tuple(order), draw(room), draw(BATCHES))


@st.composite
def each_in_order(draw: st.DrawFn, fams: st.SearchStrategy[tuple[Family, ...]], room: Any) -> Instance:
    """Families interleaved at random, each in the order it was made (its base first: a star's base, a
    flood's original, a hub before its spokes, a chain's versions in the order they drift), with bounds
    ``room``."""
    got = draw(fams)
    n = sizes(got)
    starts = [sum(n[:k]) for k in range(len(n))]
    turns = draw(st.permutations([k for k, size in enumerate(n) for _ in range(size)]))
    taken = [0] * len(n)
    order = []
    for k in turns:
        order.append(starts[k] + taken[k])
        taken[k] += 1
    return Instance(got, tuple(order), draw(room), draw(BATCHES))


# ----------------------------------------------------------------------------- the oracle
def truth(docs: Sequence[Doc]) -> dict[Pair, Fraction]:
    """Every pair at or above the threshold, with its exact Jaccard, by brute force on the package's own word
    3-shingles."""
    found = oracle.similar_pairs(oracle.shingle_sets([t for _, t in docs], "word:3"), T)
    return {
        frozenset((docs[i][0], docs[j][0])): Fraction(a, u)
        for i, j, a, u in zip(
            found.i.tolist(), found.j.tolist(), found.inter.tolist(), found.union.tolist(), strict=True
        )
    }


def components(nodes: Sequence[str], edges: Sequence[Pair]) -> set[frozenset[str]]:
    """The components of a graph with two or more members."""
    labels = metrics.component_labels(nodes, [tuple(e) for e in edges])
    groups: dict[str, set[str]] = {}
    for node, label in labels.items():
        groups.setdefault(label, set()).add(node)
    return {frozenset(g) for g in groups.values() if len(g) > 1}


def problems(docs: Sequence[Doc], got: Sequence[Alert]) -> list[str]:
    """What the alerts break of the oracle (empty: nothing): each reported pair a true pair at its exact
    similarity; each document with a true duplicate named by some alert; the components the truth's."""
    true = truth(docs)
    ids = [d for d, _ in docs]
    at = {d: i for i, d in enumerate(ids)}
    out: list[str] = []
    reported: set[Pair] = set()
    for a in got:
        for m, sim in a["matches"]:
            pair = frozenset((a["id"], m))
            reported.add(pair)
            if pair not in true:
                out.append(f"{a['id']} names {m}, below the threshold")
            elif abs(sim - float(true[pair])) > 1e-4:
                out.append(f"{a['id']} names {m} at {sim}, exactly {float(true[pair]):.4f}")
    named = {x for pair in reported for x in pair}
    for x in sorted({x for pair in true for x in pair} - named, key=at.__getitem__):
        partners = sorted((y for pair in true if x in pair for y in pair if y != x), key=at.__getitem__)
        out.append(
            f"{x} (at {at[x]}) is named by no alert; its true duplicates: {[(y, at[y]) for y in partners]}"
        )
    want, have = components(ids, list(true)), components(ids, list(reported))
    if want != have:
        split = [sorted(c, key=at.__getitem__) for c in want - have]
        out.append(f"the alert graph's components differ; true components not found whole: {split}")
    return out


def hub_merges(docs: Sequence[Doc]) -> int:
    """The documents whose earlier true duplicates are in two or more components of the truth graph of the
    documents before them (hubs: their alert must merge clusters)."""
    ids = [d for d, _ in docs]
    at = {d: i for i, d in enumerate(ids)}
    earlier: dict[str, list[str]] = {d: [] for d in ids}
    for pair in truth(docs):
        a, b = sorted(pair, key=at.__getitem__)
        earlier[b].append(a)
    parent = {d: d for d in ids}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    merges = 0
    for d in ids:
        roots = {find(e) for e in earlier[d]}
        merges += len(roots) > 1
        for r in roots:
            parent[r] = find(d)
    return merges


# ----------------------------------------------------------------------------- the daemon's processing
class Probe(MemoryGateway):
    """The in-memory twin, counting what the bounds did: joins that buckets refused (full, or taking no
    more new members in one call) and members that evictions took out of buckets."""

    refused = 0
    evicted = 0

    def apply(self, prepared: Prepared) -> Applied:
        found, hits = super().apply(prepared)
        self.refused += int(hits.refused.sum())
        return found, hits

    def evict(self, exchange: Exchange, ev: Evictions) -> None:
        probe, pipe = self, cast(MemoryExchange, exchange)

        class Counting:  # queues the twin's EVICT so that what it returns (members taken out) is counted
            def queue(self, call: Callable[[], Any]) -> None:
                pipe.queue(lambda: probe._took(call()))

        super().evict(Counting(), ev)  # type: ignore[arg-type]

    def _took(self, left: int) -> int:
        self.evicted += left
        return left

    def full(self) -> int:
        """The buckets holding ``bucket_members`` members now."""
        most = self.bounds.bucket_members
        return sum(len(v) >= most for h in self.store.buckets.values() for v in h.values())


@dataclass
class Bound:
    """What the bounds did over some runs."""

    refused: int = 0  # joins refused (a full bucket, or one that took its new members of the call)
    evicted: int = 0  # members evictions took out of buckets
    full: int = 0  # buckets full at the end of a run
    hubs: int = 0  # documents whose earlier duplicates were in two or more true components
    runs: int = 0

    def add(self, probe: Probe, docs: Sequence[Doc]) -> None:
        self.full += probe.full()
        self.refused += probe.refused
        self.evicted += probe.evicted
        self.hubs += hub_merges(docs)
        self.runs += 1


def read_alerts(raw: Sequence[dict[bytes, bytes]]) -> list[Alert]:
    out = []
    for fields in raw:
        a: Alert = {k.decode(): v.decode() for k, v in fields.items()}
        a["matches"] = json.loads(a["matches"])
        out.append(a)
    return out


def through_twin(inst: Instance, docs: Sequence[Doc]) -> tuple[list[Alert], Probe]:
    """The alerts of ``docs`` pushed in order, in batches of the instance's ``batch_size``, through a
    Processor on the in-memory twin of the Lua scripts (exact verification, the instance's bounds)."""
    s = load_settings(verify="exact", threshold=float(T), batch_size=inst.batch_size, **inst.bounds)
    gw = Probe(Keys(), s.index_spec(), 0, True, s.tombstone_ttl_s, s.bounds())
    processor = Processor(gw, s)
    raw = [raw_entry(f"{i + 1}-0", {"id": d, "text": t}) for i, (d, t) in enumerate(docs)]
    for lo in range(0, len(raw), inst.batch_size):
        batch = raw[lo : lo + inst.batch_size]
        assert processor.process(batch).ack == [e for e, _ in batch]
    return read_alerts(gw.stream(Keys().alerts)), gw


def through_redis(inst: Instance, docs: Sequence[Doc], r: redis.Redis, redis_url: str) -> list[Alert]:
    """The alerts of ``docs`` pushed to a flushed real redis-server and drained by a daemon (the Lua scripts)
    reading the instance's ``batch_size`` entries at a time."""
    r.flushall()
    push(r, [{"id": d, "text": t} for d, t in docs])
    drain(make_daemon(redis_url, verify="exact", batch_size=inst.batch_size, **inst.bounds))
    return alerts(r)


def check_twin(inst: Instance, seen: Bound | None = None) -> None:
    docs = inst.docs
    got, probe = through_twin(inst, docs)
    if seen is not None:
        seen.add(probe, docs)
    broken = problems(docs, got)
    assert not broken, "\n".join(broken)


# ----------------------------------------------------------------------------- the properties
def examples(n: int, shrink: bool = True, *more: HealthCheck) -> settings:
    """Hypothesis settings: ``n`` examples, the same ones on every run (derandomized, no database), no
    deadline; without shrinking for a property that fails today (it stops at its first failure)."""
    phases = list(Phase) if shrink else [Phase.explicit, Phase.generate]
    return settings(
        max_examples=n,
        deadline=None,
        derandomize=True,
        database=None,
        phases=phases,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, *more],
    )


def test_each_family_in_its_order_is_found_whole_with_small_bounds() -> None:
    """Families interleaved at random, each base first (and a hub before its spokes), every bound small:
    precision, every duplicated document named, the truth's components. Over the examples buckets filled and
    refused joins, and evictions took members out (the bounds bind)."""
    seen = Bound()

    @examples(120)
    @given(each_in_order(families(), bounds()))
    def holds(inst: Instance) -> None:
        check_twin(inst, seen)

    holds()
    assert seen.full > 0 and seen.refused > 0 and seen.evicted > 0, seen


def test_any_order_is_found_whole_with_room() -> None:
    """Any order, with the default room in buckets (32), candidates (64) and representatives (8 of each
    cluster, 4 clusters near-missed), few matches an alert lists and small batches: a star's variants before
    its base, a hub's spokes before the hub, a flood's copies before the original, shuffled templates and
    chains, all found whole. Over the examples hubs merged clusters and evictions took members out."""
    seen = Bound()

    @examples(120)
    @given(any_order(families(), bounds(**ROOM)))
    def holds(inst: Instance) -> None:
        check_twin(inst, seen)

    holds()
    assert seen.hubs > 0 and seen.evicted > 0, seen


#: why the properties fail today (the counterexamples below, traced)
CROWDED = (
    "buckets of 4 to 8: a neighbourhood with more documents than places (shared out evenly by lua.DISPLACE) can"
    " leave a document out of every bucket it shares with its duplicate"
)
FEW = (
    "few candidates, representatives and near-miss members: a duplicate read but outranked, or evicted, not a"
    " representative and beyond the members a near miss walks"
)


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=CROWDED)
def test_any_order_is_found_whole_with_crowded_buckets() -> None:
    """Any order, buckets of 4 to 8 members; candidates and representatives at their defaults."""

    @examples(60, shrink=False)
    @given(any_order(families(), bounds(**{**ROOM, "bucket_members": st.integers(4, 8)})))
    def holds(inst: Instance) -> None:
        check_twin(inst)

    holds()


def test_any_order_is_found_whole_with_few_candidates_and_representatives() -> None:
    """Any order, buckets of 32 members; 1 to 16 candidates, 1 to 8 representatives, 1 to 4 near-missed
    clusters, and the near miss's walk of a cluster's members at its default (1024): a duplicate read but
    outranked, or evicted and no representative, is found by the walk of its nearly matched cluster (this
    failed before the walk: test_any_order_is_lost_with_few_near_miss_members)."""

    @examples(60, shrink=False)
    @given(any_order(families(), bounds(bucket_members=st.just(32), near_miss_members=st.just(1024))))
    def holds(inst: Instance) -> None:
        check_twin(inst)

    holds()


@pytest.mark.xfail(strict=True, raises=AssertionError, reason=FEW)
def test_any_order_is_lost_with_few_near_miss_members() -> None:
    """Any order, buckets of 32 members; 1 to 16 candidates, 1 to 8 representatives, 1 to 4 near-missed
    clusters, 0 to 8 members walked on a near miss."""

    @examples(60, shrink=False)
    @given(any_order(families(), bounds(bucket_members=st.just(32))))
    def holds(inst: Instance) -> None:
        check_twin(inst)

    holds()


# ----------------------------------------------------------------------------- shrunk counterexamples
DEFAULT = {"max_candidates": 64, "max_matches": 10, "representatives": 8, "near_miss_clusters": 4}
FEWEST = {"bucket_members": 32, "max_candidates": 1, "max_matches": 1, "representatives": 1}


def _then(*runs: tuple[int, int] | int) -> tuple[int, ...]:
    """An order: each int itself, each (a, b) the range a..b-1."""
    out: list[int] = []
    for r in runs:
        out += list(range(*r)) if isinstance(r, tuple) else [r]
    return tuple(out)


COUNTEREXAMPLES = {
    # 12 spokes of one stem, spokes 0-7 and 9 first (each its own cluster: below 0.8 to one another), spoke 8,
    # the hub, spokes 10 and 11; buckets of 4, one document a batch. Spoke 8 (at 9) joins 13 of its 25
    # buckets, none of them the hub's (12 alone, one with 3 spokes); the 12 it shares with the hub hold 4
    # earlier spokes each and refuse it. The hub names the other 9 earlier spokes; spoke 8, no alert.
    "hub-spokes-first-crowded": (
        Instance((("hub", 13, 0),), _then((1, 9), 10, 9, 0, 11, 12), {"bucket_members": 4, **DEFAULT}),
        "full buckets: a hub's spoke pushed before the hub joins none of the buckets they share",
    ),
    # A star of 14 variants, 9 of them before the base; buckets of 4. Variant 6 (at 8, just before the base)
    # joins 18 of its buckets, alone in each; the 7 it shares with the base hold 4 earlier variants each (each
    # its own cluster) and refuse it; the base, a hub of the 9, names the other 8.
    "star-variants-first-crowded": (
        Instance(
            (("star", 15, 0),),
            _then(1, 2, 3, 9, 4, 5, 6, 8, 7, 0, (10, 15)),
            {"bucket_members": 4, **DEFAULT},
        ),
        "full buckets: a star's variant pushed before the base joins none of the buckets they share",
    ),
    # A flood of 32 copies, 14 of them before the original (each with up to 3 of 93 words replaced: some below
    # 0.8 to one another, so several clusters); buckets of 4. Copy 13 (at 13) matches nothing, joins 20 of its
    # buckets, alone in each, and is refused by the 5 it shares with its true duplicates (the original, copies
    # 21, 24 and 28), full of members of 3 clusters; none of them reads it.
    "flood-copies-first-crowded": (
        Instance(
            (("flood", 33, 4405),),
            _then(10, (1, 10), (11, 15), 0, (15, 33)),
            {"bucket_members": 4, **DEFAULT},
        ),
        "full buckets: a flood's copy pushed before the original joins none of the buckets they share",
    ),
    # A hub after 4 of its 30 spokes, then the others; 1 candidate. Spoke 4 (right after the hub) reads the
    # hub in 8 of its buckets, ranked third: spokes 2 and 3 (now the hub's cluster) share more of its bands.
    # It verifies the best-ranked of the cluster and one more, both at 0.79, and no further one (the limit is
    # spent). Its near miss finds no hub among the representatives (spoke 3): they count matches, and the hub
    # was the matcher (the same with 8 representatives; 2 candidates find it).
    "hub-spoke-after-hub-few-candidates": (
        Instance((("hub", 31, 2),), _then(1, 2, 3, 4, 0, (5, 31)), {**FEWEST, "near_miss_clusters": 1}),
        "1 candidate: a spoke after the hub verifies 2 spokes ranked above the hub; the hub is no representative",
    ),
    # A flood whose first copy comes before the original (copy 0, copy 12, the original, the others): copy 0
    # is the cluster's anchor in every bucket, the original a middle member, evicted (a bucket keeps the
    # anchor and the two newest). Copy 18 (at 20) reads and verifies 8 copies, all below 0.8 (0.70 to 0.77:
    # a near miss), and the one representative is copy 0; its true duplicates (the original, copies 10 and
    # 19) go unread. 2 representatives find it, and so does the near miss's walk of the cluster's members
    # (near_miss_members; with 0 it is lost).
    "flood-original-evicted-one-representative": (
        Instance(
            (("flood", 26, 0),),
            _then(1, 13, 0, (2, 13), 20, (14, 20), (21, 26)),
            {"bucket_members": 32, "max_candidates": 64, "max_matches": 1, "representatives": 1},
        ),
        "1 representative: a flood's original, after its first copy, is evicted and is not the representative",
    ),
    # A template of 16 instances, the one with the longest middle first (below 0.8 to the base), then the
    # base and the others; 1 candidate, 1 representative. Instance 10 reads the base and instance 0 (0.81
    # each) ranked 6th and 8th of 9, verifies 3 others (0.75 to 0.78: a near miss), and the one
    # representative is instance 7 (2 representatives, 4 candidates or the near miss's walk of the members
    # find it).
    "template-longest-first-few-candidates": (
        Instance((("template", 17, 1),), _then(3, 0, 1, 2, (4, 17)), {**FEWEST, "near_miss_clusters": 1}),
        "1 candidate, 1 representative: a template's instance reads the base ranked 6th; the representative is another",
    ),
}


#: the counterexamples that pass now (they failed before): full buckets share their places out evenly
#: (lua.DISPLACE), and a near miss verifies further candidates however many were verified (matching.py)
FIXED = {
    "hub-spokes-first-crowded",
    "star-variants-first-crowded",
    "flood-copies-first-crowded",
    "hub-spoke-after-hub-few-candidates",
    "flood-original-evicted-one-representative",
    "template-longest-first-few-candidates",
}
#: ... and with no member walked on a near miss (near_miss_members 0), as before the walk, these are lost
WALKED = {"flood-original-evicted-one-representative", "template-longest-first-few-candidates"}


@pytest.mark.parametrize("where", ["twin", "redis"])
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            inst,
            id=name,
            marks=() if name in FIXED else pytest.mark.xfail(strict=True, raises=AssertionError, reason=why),
        )
        for name, (inst, why) in COUNTEREXAMPLES.items()
    ],
)
def test_counterexample(case: Instance, where: str, request: pytest.FixtureRequest) -> None:
    """A counterexample the properties found, shrunk (the shape, the order, the bounds; above each, the
    document no alert names and why, traced on the twin), on the twin and on the real redis-server."""
    if where == "twin":
        check_twin(case)
        return
    docs = case.docs
    got = through_redis(case, docs, request.getfixturevalue("r"), request.getfixturevalue("redis_url"))
    broken = problems(docs, got)
    assert not broken, "\n".join(broken)


# ----------------------------------------------------------------------------- against the real redis-server
@examples(10, True, HealthCheck.function_scoped_fixture)  # (the fixtures' server is flushed per example)
@given(inst=each_in_order(families(most=4, largest=30), bounds()))
def test_the_lua_scripts_find_each_family_whole(r: redis.Redis, redis_url: str, inst: Instance) -> None:
    """Fewer, smaller instances (each family in its order, small bounds) through a daemon on the real
    redis-server: the oracle holds, and the twin's alerts are the scripts' (ids, matches, clusters)."""
    docs = inst.docs
    got = through_redis(inst, docs, r, redis_url)
    broken = problems(docs, got)
    assert not broken, "\n".join(broken)
    twin, _ = through_twin(inst, docs)
    fields = ("id", "duplicate_of", "similarity", "matches", "cluster")
    assert [[a[f] for f in fields] for a in got] == [[a[f] for f in fields] for a in twin]


@pytest.mark.parametrize("name", sorted(WALKED))
def test_counterexample_without_the_walk_is_lost(name: str) -> None:
    """The counterexamples the near miss's walk of a cluster's members fixed are lost again without it
    (near_miss_members 0: the near miss verifies the representatives and the cluster's oldest member)."""
    inst, _ = COUNTEREXAMPLES[name]
    with pytest.raises(AssertionError, match="is named by no alert"):
        check_twin(
            Instance(inst.families, inst.order, {**inst.bounds, "near_miss_members": 0}, inst.batch_size)
        )
