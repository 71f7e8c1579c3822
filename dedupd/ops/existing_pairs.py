"""The alerts of the pairs of indexed documents that a lower threshold makes duplicates
(``dedupd rebuild --threshold T --alert-existing``).

A rebuild that lowers the threshold from ``old`` to ``new`` re-bands the stored signatures; the daemons then
verify every new document at ``new``, but the documents indexed before were verified at ``old``: a pair of them
with a similarity in ``[new, old)`` was never alerted. After the switch (the rebuild recorded the debt just
before it: generations.OwedAlerts), :class:`ExistingPairs` goes through the serving generation's documents
that the daemons had been given and had acknowledged before the switch (an entry pending then is verified
again at the new threshold by the daemon that takes it), in integer id order (the order they were created
in, as the daemons took them), in batches, and for each one:

1. reads the ids in its buckets (the new banding's; read only, joining nothing) and keeps the earlier
   documents (smaller integer ids: created before it), so that each pair is looked at from its later document,
   as the daemon would have;
2. verifies them at the new threshold as the daemon does (matching.verify_reads: its bounds, exact or by
   signature as the index says);
3. decides whether its fresh matches (below the old threshold, with documents the daemons have not verified
   again since the switch) change what the user knows (ops/owed_groups.py: a match in another cluster, or a
   document never alerted); if so, unites it with the clusters of its matches (one union per distinct
   cluster, as the daemon; only while its id maps to it and its record is the one verified) and writes one
   alert naming its matches best first (bounds.alert_matches: at most ``max_matches``, plus the best of each
   earlier cluster), only while the records of the documents it names are the ones verified
   (index/guarded.py), with ``input`` the entry that last changed the document and ``by`` = ``rebuild``. The
   index keeps no ``meta`` of a document: these alerts have none.

After each batch the debt records the last integer id paid: interrupted, the same ``dedupd rebuild`` run
again pays the rest, and each alert is written once (a batch written again is marked in the alerts stream's
seen set, ``rebuild:<generation>:<integer id>``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from dedupd.daemon.alert import BY_REBUILD, Alert
from dedupd.errors import ConfigError
from dedupd.index.docstate import sid
from dedupd.index.gateway import RedisGateway
from dedupd.index.generations import Generations, OwedAlerts, RebuildError
from dedupd.index.guarded import guarded
from dedupd.index.keys import Keys
from dedupd.index.matching import verify_reads
from dedupd.index.protocol import Emitted
from dedupd.index.record import Record
from dedupd.index.unionfind import live_replies
from dedupd.ops.owed_groups import OwedGroup, owed_groups
from dedupd.ops.rebuild import rebands_only
from dedupd.server.connection import RedisClient
from dedupd.settings import Settings
from dedupd.similarity.bounds import alert_matches
from dedupd.similarity.spec import IndexSpec


def check_lowering(current: IndexSpec, target: IndexSpec, source: Path | None) -> None:
    """Refuse ``--alert-existing`` on a rebuild that does not only lower the threshold.

    Raises:
        ConfigError: when the threshold does not go down, the texts would be re-indexed, or ``--from`` is given.
    """
    old, new = current.threshold, target.threshold
    if new >= old:
        did = "keeps it" if new == old else f"raises it to {new:g}"
        raise ConfigError(
            "--alert-existing alerts the pairs of indexed documents that a lower threshold makes duplicates: "
            f"give --threshold below the index's {old:g} (this rebuild {did})"
        )
    if source is not None or not rebands_only(current, target):
        changed = [name for name, _, _ in current.differences(target) if name not in _REBANDING]
        what = f"changes {', '.join(changed)}" if changed else "re-indexes the texts of --from"
        raise ConfigError(
            "--alert-existing goes with a rebuild that only lowers the threshold (it re-bands the stored "
            f"signatures); this one {what}: rebuild that first, then lower the threshold with --alert-existing"
        )


Progress = Callable[[str, int, int | None], None]  # (phase, done, total)
_BATCH = 500  # documents verified together (at least; fewer at the end)
_WINDOW = 500  # integer ids whose versions are read together
PHASE = "alerting existing pairs"
_REBANDING = ("bands", "rows", "threshold", "shard_bits")  # what a re-banding rebuild may change


@dataclass(frozen=True, slots=True)
class Paid:
    """What paying the owed alerts did."""

    owed: OwedAlerts
    new_threshold: float
    documents: int  # documents indexed before the switch, looked at (by this run)
    alerts: int  # alerts written (not counting those written by an earlier, interrupted run)


class ExistingPairs:
    """Pays the alerts a rebuild that lowered the threshold owes (see the module docstring)."""

    def __init__(self, client: RedisClient, settings: Settings, progress: Progress) -> None:
        self.client = client
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.generations = Generations(client, self.keys)
        self.progress = progress

    def owed(self) -> OwedAlerts | None:
        """The alerts owed for the serving generation, if any."""
        return self.generations.owed_alerts()

    def pay(self, owed: OwedAlerts) -> Paid:
        """Write the owed alerts, in integer id order from where an earlier run stopped, then clear the debt.

        Raises:
            RebuildError: when another rebuild switches the index before or while they are written.
        """
        spec = self._serving(owed)
        gw = RedisGateway(self.client, self.keys, spec, owed.gen, bounds=self.settings.bounds())
        top = int(self.client.get(self.keys.id_seq) or 0)  # (every document indexed before the switch: to it)
        switch, looked, written = _Switch.of(owed), 0, 0
        batch: dict[int, str] = {}  # integer id -> version, of the documents indexed before the switch
        for lo in range(owed.done + 1, top + 1, _WINDOW):
            window = list(range(lo, min(lo + _WINDOW, top + 1)))
            batch.update((n, v) for n, v in gw.versions(window).items() if switch.before(v))
            if len(batch) >= _BATCH or window[-1] == top:
                self._serving(owed)
                written += self._batch(gw, owed, switch, batch) if batch else 0
                looked, batch = looked + len(batch), {}
                paid = self.generations.paid_up_to(owed, window[-1])
                if paid is None:
                    raise self._superseded(owed)
                owed = paid
            self.progress(PHASE, window[-1], top)
        self.generations.settle_alerts(owed)
        return Paid(owed, spec.threshold, looked, written)

    def _serving(self, owed: OwedAlerts) -> IndexSpec:
        """The serving spec, while the generation that owes the alerts serves.

        Raises:
            RebuildError: when another rebuild has switched since.
        """
        state = self.generations.read()
        if state is None or state.gen != owed.gen:
            raise self._superseded(owed)
        return state.spec

    @staticmethod
    def _superseded(owed: OwedAlerts) -> RebuildError:
        return RebuildError(
            f"another rebuild switched the index while the alerts owed by generation {owed.gen} were being "
            f"written: the rest of them (the pairs below {owed.old_threshold:g} of the documents not yet looked "
            "at) are not written"
        )

    def _batch(self, gw: RedisGateway, owed: OwedAlerts, switch: _Switch, versions: dict[int, str]) -> int:
        """Look at documents indexed before the switch (integer id -> version); how many alerts it wrote."""
        loaded = gw.load_records(sorted(versions))
        records = {n: r for n, r in loaded.items() if r is not None and r.entry_id == versions[n]}
        indexed = [rec for rec in records.values() if not rec.fingerprint.empty]
        if not indexed:
            return 0
        found = gw.peek(gw.fingerprinter.band_hashes([rec.fingerprint for rec in indexed]))
        reads = {}
        for rec, ids in zip(indexed, found, strict=True):
            earlier = ids[ids < rec.num]
            if earlier.size:
                reads[rec.num] = (earlier, rec.num)
        own = {rec.num: (rec.doc_id, rec.fingerprint) for rec in indexed}
        verified = verify_reads(gw, own, reads).matches
        named = sorted({m.num for ms in verified.values() for m in ms})
        seen = gw.versions(named)
        live = {n: [m for m in ms if seen[m.num]] for n, ms in sorted(verified.items())}
        unchanged = {n for n, v in seen.items() if switch.before(v)}
        wanted = sorted({x for n, ms in live.items() for x in (n, *(m.num for m in ms))})
        roots = dict(zip(wanted, gw.roots(wanted, fresh=True), strict=True))
        groups = owed_groups([(n, ms) for n, ms in live.items() if ms], roots, unchanged, owed.old_threshold)
        if not groups:
            return 0
        return self._alert(gw, records, groups, seen)

    def _alert(
        self, gw: RedisGateway, records: dict[int, Record], groups: list[OwedGroup], seen: dict[int, str]
    ) -> int:
        """Unite each document with the clusters of its matches and write its alert; how many were written.

        The unions are sent while each document's record is at the version verified (and, in the script,
        while its id maps to it: not deleted); the alerts while the records of the documents they name are
        (index/guarded.py), so that no alert names a document deleted or changed meanwhile."""
        names = {m.num: m.doc_id for g in groups for m in g.matches} | {n: records[n].doc_id for n in records}
        sent: list[OwedGroup] = []

        def unite(now: Mapping[int, str], exchange: Any) -> None:
            sent[:] = [g for g in groups if now[g.num] == records[g.num].entry_id]
            unions = [(g.num, names[g.num], [(m, names[m]) for m in g.best]) for g in sent]
            gw.union_live(exchange, unions)

        replies = _guarded(gw, [g.num for g in groups], unite)
        if not sent:
            return 0
        done = live_replies([len(g.best) for g in sent], replies[-1])
        united = [(g, r[0]) for g, r in zip(sent, done, strict=True) if r is not None]
        if not united:
            return 0
        roots = [root for _, root in united]
        clusters = dict(zip(roots, gw.cluster_names(roots, names), strict=True))
        s, emitted = self.settings, list[Emitted]()

        def emit(now: Mapping[int, str], exchange: Any) -> None:
            emitted[:] = [
                e
                for g, root in united
                if (e := self._emitted(gw, records[g.num], g, root, now, seen, clusters))
            ]
            gw.emit(exchange, self.keys.alerts, s.alerts_retention, s.seen_ttl_s, emitted)

        watched = [x for g, root in united for x in (g.num, root, *(m.num for m in g.matches))]
        replies = _guarded(gw, watched, emit)
        written = int(replies[-1]) if emitted else 0
        gw.count({"alerts": written})
        return written

    @staticmethod
    def _emitted(
        gw: RedisGateway,
        rec: Record,
        group: OwedGroup,
        root: int,
        now: Mapping[int, str],
        seen: Mapping[int, str],
        clusters: Mapping[int, str],
    ) -> Emitted | None:
        """The alert of one united document, given the versions of the records it names now: none when the
        document changed or went, without the matches that did (their similarity was of another version), its
        cluster named ``#n`` when the root's document went (as the daemons name it); marked to be written once.
        """
        if now[rec.num] != rec.entry_id:
            return None
        kept = [(m, r) for m, r in zip(group.matches, group.roots, strict=True) if now[m.num] == seen[m.num]]
        if not kept:
            return None
        matches = alert_matches(
            [m for m, _ in kept], [r for _, r in kept], gw.bounds.max_matches, gw.bounds.max_clusters
        )
        cluster = clusters[root] if now[root] else f"#{root}"
        alert = Alert(
            rec.doc_id, matches, cluster, rec.entry_id, gw.spec.verify, rec.source, None, by=BY_REBUILD
        )
        return f"rebuild:{gw.generation}:{rec.num}", alert.fields()


def _guarded(gw: RedisGateway, nums: list[int], queue: Callable[[Mapping[int, str], Any], None]) -> list[Any]:
    """index/guarded.py's :func:`guarded`.

    Raises:
        RebuildError: when the documents kept changing (the batch is written by the next run).
    """
    try:
        return guarded(gw, nums, queue)
    except redis.WatchError:
        raise RebuildError(
            "the documents kept changing while their owed alerts were written: run the same `dedupd rebuild` "
            "again to write the rest"
        ) from None


@dataclass(frozen=True, slots=True)
class _Switch:
    """What the daemons had done at the switch: the last entry they had been given, and those still pending."""

    cut: tuple[int, int]
    pending: frozenset[str]

    @classmethod
    def of(cls, owed: OwedAlerts) -> _Switch:
        return cls(sid(owed.cut), frozenset(owed.pending))

    def before(self, version: str) -> bool:
        """Whether a record at ``version`` was indexed before the switch, by an entry the daemons acknowledged
        (an entry pending then is verified again at the new threshold by the daemon that takes it)."""
        return bool(version) and sid(version) <= self.cut and version not in self.pending
