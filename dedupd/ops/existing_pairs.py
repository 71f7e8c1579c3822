"""The alerts of the pairs of indexed documents that a lower threshold makes duplicates
(``dedupd rebuild --threshold T --alert-existing``).

A rebuild that lowers the threshold from ``old`` to ``new`` re-bands the stored signatures; the daemons then
verify every new document at ``new``, but the documents indexed before were verified at ``old``: a pair of them
with a similarity in ``[new, old)`` was never alerted. After the switch (the rebuild recorded the debt just
before it: generations.OwedAlerts), :class:`ExistingPairs` goes through the serving generation's documents
that the daemons had been given before the switch, in batches, and for each one:

1. reads the ids in its buckets (the new banding's; read only, joining nothing) and keeps the earlier
   documents (smaller integer ids: created before it), so that each pair is looked at from its later document,
   as the daemon would have;
2. verifies them at the new threshold as the daemon does (matching.verify_reads: its bounds, exact or by
   signature as the index says) and keeps the matches below the old threshold that the daemons had not
   verified at the new one already (a document changed after the switch was);
3. unites the document with the clusters of those matches (one union per distinct cluster, as the daemon),
   and writes one alert naming them (bounds.alert_matches: at most ``max_matches``, plus the best of each
   earlier cluster), with ``input`` the entry that last changed the document and ``by`` = ``rebuild``, once:
   its marker in the alerts stream's seen set is ``rebuild:<generation>:<integer id>``.

Interrupted, the debt stays recorded: the same ``dedupd rebuild`` run again pays the rest (an alert already
written is not written again).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dedupd.daemon.alert import BY_REBUILD, Alert
from dedupd.errors import ConfigError
from dedupd.index.docstate import sid
from dedupd.index.gateway import RedisGateway
from dedupd.index.generations import Generations, OwedAlerts
from dedupd.index.keys import Keys
from dedupd.index.matching import verify_reads
from dedupd.index.record import Record
from dedupd.ops.rebuild import rebands_only
from dedupd.server.connection import RedisClient
from dedupd.settings import Settings
from dedupd.similarity.bounds import alert_matches, earlier_clusters
from dedupd.similarity.matches import Found
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
_BATCH = 500  # documents per batch
PHASE = "alerting existing pairs"
_REBANDING = ("bands", "rows", "threshold", "shard_bits")  # what a re-banding rebuild may change


@dataclass(frozen=True, slots=True)
class Paid:
    """What paying the owed alerts did."""

    owed: OwedAlerts
    new_threshold: float
    documents: int  # documents indexed before the switch, looked at
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
        """Write the owed alerts, then clear the debt."""
        state = self.generations.read()
        assert state is not None and state.gen == owed.gen
        gw = RedisGateway(self.client, self.keys, state.spec, state.gen, bounds=self.settings.bounds())
        cut, done, written = sid(owed.cut), 0, 0
        total = int(self.client.hlen(self.keys.id_forward))  # (about: the documents of every generation)
        looked = 0
        for nums in self._doc_nums(state.gen):
            seen, wrote = self._batch(gw, owed, cut, nums)
            looked, written, done = looked + seen, written + wrote, done + len(nums)
            self.progress(PHASE, done, max(total, done))
        self.generations.settle_alerts()
        return Paid(owed, state.spec.threshold, looked, written)

    def _batch(
        self, gw: RedisGateway, owed: OwedAlerts, cut: tuple[int, int], nums: list[int]
    ) -> tuple[int, int]:
        """Look at one batch of documents; returns how many were indexed before the switch, and how many
        alerts it wrote."""
        versions = gw.versions(nums)
        before = [n for n in nums if versions[n] and sid(versions[n]) <= cut]
        records = {n: rec for n, rec in gw.load_records(before).items() if rec is not None}
        indexed = [rec for rec in records.values() if not rec.fingerprint.empty]
        if not indexed:
            return len(before), 0
        found = gw.peek(gw.fingerprinter.band_hashes([rec.fingerprint for rec in indexed]))
        reads = {}
        for rec, ids in zip(indexed, found, strict=True):
            earlier = ids[ids < rec.num]
            if earlier.size:
                reads[rec.num] = (earlier, rec.num)
        own = {rec.num: (rec.doc_id, rec.fingerprint) for rec in indexed}
        verified = verify_reads(gw, own, reads).matches
        fresh = {n: [m for m in found if m.similarity < owed.old_threshold] for n, found in verified.items()}
        named = sorted({m.num for ms in fresh.values() for m in ms})
        changed = {n for n, v in gw.versions(named).items() if not v or sid(v) > cut}
        owing = {}
        for n, ms in sorted(fresh.items()):
            if kept := [m for m in ms if m.num not in changed]:
                owing[n] = kept
        return len(before), self._alert(gw, records, owing) if owing else 0

    def _alert(self, gw: RedisGateway, records: dict[int, Record], owing: dict[int, list[Found]]) -> int:
        """Unite each document with the clusters of its new matches and write its alert; how many were written."""
        nums = list(owing)
        groups = [(n, [m.num for m in owing[n]]) for n in nums]
        wanted = sorted({x for n, ms in groups for x in (n, *ms)})
        roots = dict(zip(wanted, gw.roots(wanted, fresh=True), strict=True))
        earlier = earlier_clusters(groups, roots)
        names = {m.num: m.doc_id for ms in owing.values() for m in ms} | {n: records[n].doc_id for n in nums}
        unions = gw.union(
            [(n, [(m, names[m]) for m in best]) for n, (_, best) in zip(nums, earlier, strict=True)]
        )
        clusters = gw.cluster_names([root for root, _ in unions.clusters], {**names, **unions.names})
        emitted = []
        for n, (before, _), cluster in zip(nums, earlier, clusters, strict=True):
            rec = records[n]
            matches = alert_matches(owing[n], before, gw.bounds.max_matches)
            alert = Alert(
                rec.doc_id, matches, cluster, rec.entry_id, gw.spec.verify, rec.source, None, by=BY_REBUILD
            )
            emitted.append((f"rebuild:{gw.generation}:{n}", alert.fields()))
        exchange = gw.exchange()
        s = self.settings
        gw.emit(exchange, self.keys.alerts, s.alerts_retention, s.seen_ttl_s, emitted)
        written = int(exchange.execute()[0])
        gw.count({"alerts": written})
        return written

    def _doc_nums(self, gen: int) -> Iterator[list[int]]:
        """The integer ids of the generation's documents, in batches (in no particular order)."""
        prefix = len(self.keys.doc(0, gen)) - 1
        nums: list[int] = []
        for key in self.client.scan_iter(match=self.keys.doc_pattern_of(gen), count=2000):
            nums.append(int(key[prefix:]))
            if len(nums) >= _BATCH:
                yield nums
                nums = []
        if nums:
            yield nums
