"""The last stage of a run: evictions, unions, alerts, baskets and query verdicts, written in one or two
exchanges.

Order matters between overlapping batches (daemon/handoff.py): the evictions decide what the next batch
reads in its buckets, so with a hand-off they go first, in an exchange of their own, and the next batch is
let go; the unions follow (with the names of the clusters they leave, read in the same exchange), and a
next batch that deletes documents is let go after them (a root it deletes is named first). The alerts,
baskets and replies go last. Every output is written once per input entry id (a redelivered entry emits
nothing new).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from dedupd.daemon.alert import Alert
from dedupd.daemon.batch import Run
from dedupd.daemon.clusters import Clusters, clusters_of
from dedupd.daemon.entries import Entry, Op
from dedupd.daemon.evictions import evictions, placements_of
from dedupd.daemon.handoff import Handoff
from dedupd.daemon.planner import Action, Step
from dedupd.index.matching import Verification
from dedupd.index.protocol import Emitted, Exchange, Gateway
from dedupd.index.verdict import Match, Verdict, cluster_of
from dedupd.settings import Settings
from dedupd.similarity.bounds import alert_matches
from dedupd.similarity.matches import Found

_WORDS = re.compile(r"\w+")
PHRASE_WORDS = 3  # words per phrase of a ``baskets = "phrases"`` basket
MAX_PHRASES = 1000  # distinct phrases a document's basket holds at most (its first ones)
_NO_LINKS: list[str] = []  # (never changed)


@dataclass(frozen=True, slots=True)
class Written:
    """What a run's outputs were: its alerts, and how many queries it answered."""

    alerts: list[Alert]
    queries: int


def write_outputs(
    gw: Gateway,
    settings: Settings,
    run: Run,
    done: list[int],
    verified: Verification,
    handoff: Handoff | None = None,
) -> Written:
    """Write the outputs of a run's steps ``done`` (``Run.done``; see the module docstring); ``handoff`` is set
    as the next batch may go."""
    clusters = clusters_of(gw, run, done, verified)
    exchange = gw.exchange()
    gw.evict(exchange, evictions(run, clusters))
    gw.displace(exchange, placements_of(run, done))  # (after EVICT: a place it freed is taken first)
    if handoff is not None:  # the next batch waits for the evictions alone
        if len(exchange):
            exchange.execute()
        handoff.evicted.set()
    names = unite(gw, clusters, exchange)
    if handoff is not None:
        handoff.unioned.set()
    named: list[int] = []
    alerts = alerts_of(gw, clusters, verified, names, named)
    if gw.spec.windowed and gw.spec.refresh_on_duplicate:  # the documents an alert names live on
        gw.touch(exchange, named)
    gw.emit(exchange, gw.keys.alerts, settings.alerts_retention, settings.seen_ttl_s, _emitted(alerts))
    entries = [run.steps[i].entry for i in done if run.steps[i].action is not Action.QUERY]
    gw.emit(
        exchange,
        gw.keys.baskets,
        settings.basket_retention,
        settings.seen_ttl_s,
        baskets(settings, entries, alerts),
    )
    queries = [run.steps[i] for i in done if run.steps[i].action is Action.QUERY]
    by_entry = {run.steps[i].entry.entry_id: m for i, m in verified.matches.items()}
    replies(gw, settings, exchange, queries, by_entry)
    exchange.execute()
    return Written(alerts, len(queries))


def unite(gw: Gateway, clusters: Clusters, exchange: Exchange) -> list[str]:
    """Send what ``exchange`` holds with the unions of the alerting documents (one per distinct earlier
    cluster); the name of each one's cluster after them (read before the next batch may delete a root)."""
    if not clusters.alerting:
        return []
    names = clusters.names
    groups = [
        (num, [(m, names[m]) for m in best])
        for (num, _), (_, best) in zip(clusters.groups, clusters.earlier, strict=True)
    ]
    expected = [root for _, root, _ in clusters.merged if root not in names]
    unions = gw.union(groups, exchange, expected)
    return gw.cluster_names([root for root, _ in unions.clusters], {**names, **unions.names})


def alerts_of(
    gw: Gateway, clusters: Clusters, verified: Verification, names: list[str], named: list[int] | None = None
) -> list[Alert]:
    """The alert of each alerting document: its matches as an alert names them (bounds.alert_matches) and the
    name of its cluster; the integer ids of the documents they name are added to ``named``."""
    out = []
    for (i, step), root, (before, _) in zip(clusters.alerting, names, clusters.earlier, strict=True):
        e = step.entry
        found = alert_matches(verified.matches[i], before, gw.bounds.max_matches, gw.bounds.max_clusters)
        if named is not None:
            named += [f.num for f in found]
        out.append(Alert(e.doc_id, found, root, e.entry_id, gw.spec.verify, e.source, e.meta))
    return out


def _emitted(alerts: list[Alert]) -> list[Emitted]:
    return [(a.input, a.fields()) for a in alerts]


def baskets(settings: Settings, entries: list[Entry], alerts: list[Alert]) -> list[Emitted]:
    """The basket entries of a run's entries (under the default mode, ``items``, only those that name items)."""
    mode = settings.baskets
    if mode == "items":
        entries = [e for e in entries if e.items is not None]
    links: dict[str, list[str]] = {}  # (a basket of sources only: the ids a document duplicates)
    if mode == "sources":
        links = {a.input: [m.id for m in a.matches] for a in alerts}
    return [
        (e.entry_id, ["id", e.doc_id, *b])
        for e in entries
        if (b := basket(mode, e, links.get(e.entry_id, _NO_LINKS))) is not None
    ]


def basket(mode: str, e: Entry, links: list[str]) -> list[str] | None:
    """The basket entry's fields after ``id``, or None when the entry writes no basket."""
    if e.op is Op.DELETE or mode == "none":
        return None
    if e.items is not None:
        return ["items", json.dumps(list(e.items), ensure_ascii=False)]
    if mode == "sources":
        if e.source is None:
            return None
        return ["items", json.dumps([e.source], ensure_ascii=False), "links", json.dumps(links)]
    items = None
    if mode == "words" and e.text:
        items = sorted(set(_WORDS.findall(e.text.lower())))
    elif mode == "phrases" and e.text:
        items = phrases(e.text)
    return None if items is None else ["items", json.dumps(items, ensure_ascii=False)]


def phrases(text: str) -> list[str]:
    """A text's distinct word 3-grams (lower case), in order of first appearance, at most ``MAX_PHRASES``.

    >>> phrases("Read the docs. Read the docs!")
    ['read the docs', 'the docs read', 'docs read the']
    """
    words = _WORDS.findall(text.lower())
    seen: dict[str, None] = {}
    for i in range(len(words) - PHRASE_WORDS + 1):
        seen.setdefault(" ".join(words[i : i + PHRASE_WORDS]))
        if len(seen) >= MAX_PHRASES:
            break
    return list(seen)


def replies(
    gw: Gateway, settings: Settings, exchange: Exchange, queries: list[Step], matches: dict[str, list[Found]]
) -> None:
    """Queue the verdicts of the query steps, one call per reply stream; a verdict says whether the
    query's id is an indexed document (its live record, as read when the run was planned)."""
    if not queries:
        return
    hits = [matches.get(s.entry.entry_id, []) for s in queries]
    by_stream: dict[str, list[Emitted]] = {}
    for s, (found, cluster) in zip(queries, cluster_of(gw, hits), strict=True):
        q = s.entry
        kept = tuple(Match(m.doc_id, m.similarity) for m in found)
        indexed = s.old is not None and s.live
        verdict = Verdict(q.doc_id, kept, cluster, gw.spec.verify, q.entry_id, indexed)
        assert q.reply_to is not None
        by_stream.setdefault(q.reply_to, []).append((q.entry_id, verdict.fields()))
    for name, entries in by_stream.items():
        gw.reply(exchange, name, settings.reply_maxlen, settings.reply_ttl_s, entries)
