"""One batch of input entries: validate, plan, fingerprint, index, verify, alert, basket, dead-letter.

The planner (planner.py, pure) decides what each entry does; the gateway (gateway.py) does every Redis
exchange; this module strings them together. Every write is idempotent or guarded, so a redelivered entry
changes nothing and emits nothing new: bucket joins and leaves are idempotent, a record remembers the
input entry that last changed it (its version), and alerts, baskets and dead letters are emitted once per
input entry id (``lua.EMIT_MANY``, one call per batch and stream). The caller acknowledges the returned
entry ids only after :meth:`Processor.process` returns, i.e. after all writes; entries that must wait for
an older entry of their document come back in ``deferred``, neither written nor acknowledged.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd.daemon.alert import Alert
from dedupd.daemon.entries import CUT_FIELD, DOC_TOO_LARGE, MAX_DELIVERIES, Entry, Op, parse_entry
from dedupd.daemon.planner import Action, Step, byte_runs, doc_write, plan, unique_runs
from dedupd.errors import DedupdError, InputError
from dedupd.index.buckets import NO_HITS, Evictions, Hits
from dedupd.index.gateway import NO_IDS, Emitted, Gateway, Packed
from dedupd.index.matching import Verification, verify_reads
from dedupd.index.record import Record
from dedupd.index.verdict import Match, Verdict, cluster_of
from dedupd.server.connection import ScriptPipeline
from dedupd.settings import Settings
from dedupd.similarity.bounds import (
    BATCH_NEIGHBOURS,
    KEPT_PER_CLUSTER,
    VERIFIED_PER_CLUSTER,
    SharedEntries,
    alert_matches,
    earlier_clusters,
    eviction_rows,
    merged_roots,
    nearest_earlier,
    predecessors,
    shared_entries,
)
from dedupd.similarity.fingerprint import Fingerprint
from dedupd.similarity.hashing import U64Array
from dedupd.similarity.lsh import pad_rows
from dedupd.similarity.matches import Found
from dedupd.similarity.verify import jaccard_pairs

log = logging.getLogger(__name__)

RawEntry = tuple[str, dict[bytes, bytes]]
InFlight = Callable[[list[str]], list[tuple[str, ...]]]  # document ids -> their in-flight entry ids
DeadLetter = tuple[RawEntry, str, str]  # the entry, its error code, the detail
_WORDS = re.compile(r"\w+")
PHRASE_WORDS = 3  # words per phrase of a ``baskets = "phrases"`` basket
MAX_PHRASES = 1000  # distinct phrases a document's basket holds at most (its first ones)
_MAX_ATTEMPTS = 8
_NO_BANDS = np.zeros(0, dtype=np.uint64)
_NONE = np.zeros(0, dtype=np.int64)
_NO_IDS_SET: frozenset[int] = frozenset()
_NO_LINKS: list[str] = []  # (never changed)
_NO_EVICTIONS = Evictions([], _NONE, np.zeros(0, np.uint32), _NONE, _NONE, [])
_NO_SHARED = SharedEntries(np.zeros(0, np.uint64), np.zeros(0, np.uint64), np.zeros(0, np.int64), 0)
_BatchEntries = tuple[list[int], SharedEntries]  # the run's written steps with band hashes, what they share


_OWN_FIELDS = (b"error", b"detail", b"input", b"truncated", CUT_FIELD)
MAX_DEAD_FIELDS = (
    1000  # a dead letter's original fields at most (and the server script's argument count bounded)
)


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


def kept_fields(fields: dict[bytes, bytes], max_bytes: int) -> list[Any]:
    """The original fields a dead letter keeps, as field/value pairs: in order, at most ``max_bytes`` of names
    and values and ``MAX_DEAD_FIELDS`` fields; the value that crosses the bound is cut, and a ``truncated``
    field says how many fields and bytes were left out (or, for an entry read cut short, how large it was).

    >>> kept_fields({b"id": b"a", b"text": b"x" * 10}, 8)
    [b'id', b'a', b'text', b'x', 'truncated', '1 field(s) cut, 9 byte(s) left out (dead_letter_max_bytes=8)']
    """
    out: list[Any] = []
    room, cut, lost = max_bytes, 0, 0
    for k, v in fields.items():
        if k in _OWN_FIELDS:
            continue
        if len(out) >= 2 * MAX_DEAD_FIELDS or len(k) > room:
            cut, lost = cut + 1, lost + len(v)
            continue
        keep = min(len(v), room - len(k))
        out += [k, v[:keep]]
        room -= len(k) + keep
        if keep < len(v):
            cut, lost = cut + 1, lost + len(v) - keep
    full = fields.get(CUT_FIELD)
    if full is not None:
        kept = max_bytes - room
        out += [
            "truncated",
            f"the entry had {int(full)} bytes; {kept} kept (dead_letter_max_bytes={max_bytes})",
        ]
    elif cut:
        out += [
            "truncated",
            f"{cut} field(s) cut, {lost} byte(s) left out (dead_letter_max_bytes={max_bytes})",
        ]
    return out


def too_large(record: bytes | None, max_stored_bytes: int) -> str | None:
    """Why a document record may not be stored (it is larger than ``max_stored_bytes``), or None.

    >>> too_large(b"x" * 2000, 1024)
    'the document would be stored in 2000 bytes, more than max_stored_bytes=1024; it is left as it was'
    """
    if record is None or len(record) <= max_stored_bytes:
        return None
    return (
        f"the document would be stored in {len(record)} bytes, more than max_stored_bytes={max_stored_bytes}; "
        "it is left as it was"
    )


class ConcurrentUpdateError(DedupdError):
    """Documents kept changing under concurrent updates (the batch is retried later)."""


@dataclass(slots=True)
class BatchResult:
    """What a batch did."""

    ack: list[str] = field(default_factory=list)
    deferred: list[str] = field(
        default_factory=list
    )  # entry ids waiting for an older entry of their document
    processed: int = 0
    alerts: list[Alert] = field(default_factory=list)
    dead: int = 0
    queries: int = 0

    def add(self, other: BatchResult) -> None:
        self.ack += other.ack
        self.deferred += other.deferred
        self.processed += other.processed
        self.alerts += other.alerts
        self.dead += other.dead
        self.queries += other.queries


@dataclass(frozen=True, slots=True)
class Started:
    """A batch after :meth:`Processor.start`: its entries, those to dead-letter, its runs of distinct documents
    (in parts of at most ``batch_max_bytes``), and the first one's first attempt (written already)."""

    raw: Sequence[RawEntry]
    dead: list[DeadLetter]
    parts: list[list[Entry]]
    first: _Run | None

    @property
    def single(self) -> bool:
        """Whether the batch is one run: :meth:`Processor.finish` then indexes nothing more."""
        return len(self.parts) <= 1


@dataclass(slots=True)
class _Run:
    """The fingerprints and outcome of one run of steps."""

    steps: list[Step]
    new: list[Fingerprint | None]  # per step: the document after it (None: a delete, or nothing to do)
    bands: list[U64Array]  # per step: the band hashes of the document after it
    found: list[Packed | None] = field(default_factory=list)  # per step: its bucket reads, None = retry
    refused: dict[int, str] = field(default_factory=dict)  # by step: why its document was not stored
    hits: Hits = NO_HITS  # the buckets joined that were there already (``write``: the step's index)
    # records stored, to remember: integer id, stored bytes, step index, fingerprint
    written: list[tuple[int, bytes, int, Fingerprint]] = field(default_factory=list)


def _full_clusters(candidates: set[int] | frozenset[int], roots: dict[int, int]) -> set[int]:
    """The cluster roots of which ``candidates`` hold ``VERIFIED_PER_CLUSTER`` or more."""
    of = list(map(roots.get, candidates, candidates))  # (each one's root: itself when absent)
    if of and of.count(of[0]) == len(of):  # one cluster (a flood's copy)
        return {of[0]} if len(of) >= VERIFIED_PER_CLUSTER else set()
    counts: dict[int, int] = {}
    for r in of:
        counts[r] = counts.get(r, 0) + 1
    return {r for r, n in counts.items() if n >= VERIFIED_PER_CLUSTER}


def _by_step(hits: Hits, step_of: npt.NDArray[np.int64]) -> Hits:
    """``hits`` with each write's index replaced by its step's (``step_of``: by write); a write of Redis
    Cluster leftovers (-1) has none."""
    kept = hits[np.flatnonzero(hits.write >= 0)]
    return Hits(kept.names, kept.key, kept.field, step_of[kept.write], kept.refused)


class Processor:
    """Processes batches against one index generation."""

    def __init__(self, gateway: Gateway, settings: Settings, inflight: InFlight | None = None) -> None:
        self.gateway = gateway
        self.settings = settings
        # the documents' in-flight entries (the daemons: an entry waits for older ones); a rebuild replays in order
        self.inflight = inflight
        self.spec = gateway.spec

    @property
    def emits(self) -> bool:
        """Whether outputs are written (not for a generation a rebuild builds)."""
        return self.gateway.serving

    def warm_up(self) -> None:
        """Load the compiled kernels (numba: from the on-disk cache, or compiled on a first run) before
        the first batch, so that the first entries do not wait for them."""
        fps = self.gateway.fingerprinter.compute(["warm the kernels up", "wärm them ûp"])
        jaccard_pairs([fps[0].shingles, fps[1].shingles], np.zeros(1, np.int64), np.ones(1, np.int64))

    # ----- entry point -----
    def process(self, raw: Sequence[RawEntry], deliveries: dict[str, int] | None = None) -> BatchResult:
        """Process raw entries; returns the entry ids to acknowledge, the deferred ones, and what happened."""
        return self.finish(self.start(raw, deliveries))

    def start(
        self,
        raw: Sequence[RawEntry],
        deliveries: dict[str, int] | None = None,
        before_index: Callable[[bool], None] | None = None,
    ) -> Started:
        """The first half of :meth:`process`: validate the entries, then plan, fingerprint and index (records
        and buckets written) the batch's first run of distinct documents. :meth:`finish` does the rest.
        ``before_index`` is called just before the records and buckets are written, with whether the run
        deletes documents (the daemon waits there for the last batch's evictions, and also for its unions when
        this one deletes: buckets are read as they are after them, a root is not deleted before its name is
        read)."""
        dead: list[DeadLetter] = []
        valid: list[Entry] = []
        for entry_id, fields in raw:
            count = (deliveries or {}).get(entry_id, 1)
            if count > self.settings.max_deliveries:
                dead.append(
                    (
                        (entry_id, fields),
                        MAX_DELIVERIES,
                        f"delivered {count} times (max_deliveries={self.settings.max_deliveries})",
                    )
                )
                continue
            try:
                valid.append(self._parse(entry_id, fields))
            except InputError as exc:
                dead.append(((entry_id, fields), exc.code, exc.detail))
        # a later run of a deferred entry's document is deferred by the planner; a run is fingerprinted in
        # parts of at most batch_max_bytes of (normalised) text
        parts = [part for run in unique_runs(valid) for part in byte_runs(run, self.settings.batch_max_bytes)]
        return Started(raw, dead, parts, self._apply(parts[0], before_index) if parts else None)

    def finish(
        self,
        started: Started,
        evicted: Callable[[], None] | None = None,
        unioned: Callable[[], None] | None = None,
    ) -> BatchResult:
        """The second half of :meth:`process`: verify and write the outputs of the first run, process the
        other runs, dead-letter, count; returns what the batch did (nothing of it is acknowledged here).
        ``evicted`` is called once the first run's evictions are written, ``unioned`` once its unions are too
        (and the names of the clusters read), before its alerts."""
        result = BatchResult()
        raw, dead = started.raw, list(started.dead)
        fields_of = dict(raw)
        for at, part in enumerate(started.parts):
            first = at == 0
            refused = self._process_run(
                part, result, started.first if first else None, *((evicted, unioned) if first else ())
            )
            dead += [((e, fields_of[e]), DOC_TOO_LARGE, detail) for e, detail in refused]
        if dead and self.emits:
            self.dead_letter(dead)
            result.dead = len(dead)
        if self.emits:
            self._count(result)
        deferred = set(result.deferred)
        result.ack = [entry_id for entry_id, _ in raw if entry_id not in deferred]
        return result

    def _count(self, result: BatchResult) -> None:
        """Add what the batch did to the counters, once its writes are all done: a batch that fails on the way
        (a busy or restarting server) and is done again counts once, not once per attempt."""
        counts = {
            "processed": result.processed,
            "alerts": len(result.alerts),
            "dead": result.dead,
            "queries": result.queries,
        }
        if any(counts.values()):
            pipe = self.gateway.client.pipeline(transaction=False)
            for name, n in counts.items():
                if n:
                    pipe.hincrby(self.gateway.keys.counters, name, n)
            pipe.execute()

    def _parse(self, entry_id: str, fields: dict[bytes, bytes]) -> Entry:
        s = self.settings
        return parse_entry(
            entry_id, fields, s.max_doc_bytes, s.max_id_bytes, s.max_entry_bytes, s.max_normalized_bytes
        )

    def dead_letter(self, dead: Sequence[DeadLetter]) -> None:
        """Write dead letters (original fields + error + detail), once per input entry."""
        pipe = ScriptPipeline(self.gateway.client)
        entries: list[Emitted] = []
        for (entry_id, fields), code, detail in dead:
            pairs = kept_fields(fields, self.settings.dead_letter_max_bytes)
            pairs += ["error", code, "detail", detail, "input", entry_id]
            entries.append((entry_id, pairs))
        keys = self.gateway.keys
        self.gateway.emit(pipe, keys.dead, self.settings.dead_retention, self.settings.seen_ttl_s, entries)
        pipe.execute()
        for (entry_id, _), code, detail in dead:
            log.warning("dead-lettered %s: %s (%s)", entry_id, code, detail)

    # ----- one run of entries with distinct document ids -----
    def _process_run(
        self,
        entries: Sequence[Entry],
        result: BatchResult,
        applied: _Run | None = None,
        evicted: Callable[[], None] | None = None,
        unioned: Callable[[], None] | None = None,
    ) -> list[tuple[str, str]]:
        """Process a run (``applied``: its first attempt's _apply, done already; ``evicted``, ``unioned``: see
        :meth:`finish`); returns the (entry id, detail) of the entries whose document would have grown beyond
        max_stored_bytes (not written: to be dead-lettered)."""
        refused: list[tuple[str, str]] = []
        for attempt in range(1, _MAX_ATTEMPTS + 1):
            if not entries:
                return refused
            run = applied if applied is not None and attempt == 1 else self._apply(entries)
            result.deferred += [s.entry.entry_id for s in run.steps if s.action is Action.DEFER]
            refused += [(run.steps[i].entry.entry_id, detail) for i, detail in run.refused.items()]
            done = [
                i
                for i, (s, f) in enumerate(zip(run.steps, run.found, strict=True))
                if s.action is not Action.DEFER and (f is not None or not s.writes) and i not in run.refused
            ]
            if self.emits:
                let_go = (evicted, unioned) if attempt == 1 else (None, None)
                self._emit_outputs(run, done, self._verify(run), result, *let_go)
            for num, blob, i, fp in run.written:  # after the next batch was let go (``evicted``)
                e = run.steps[i].entry
                self.gateway.remember(num, blob, Record(num, e.doc_id, fp, e.entry_id, e.source))
            result.processed += sum(1 for i in done if run.steps[i].action is not Action.QUERY)
            entries = [s.entry for s, f in zip(run.steps, run.found, strict=True) if s.writes and f is None]
            if entries:  # another consumer changed these documents first: nothing of ours was written
                log.info(
                    "%d documents changed under a concurrent update (attempt %d); processing them again",
                    len(entries),
                    attempt,
                )
        if entries:
            raise ConcurrentUpdateError(f"{len(entries)} documents kept changing under concurrent updates")
        return refused

    def _apply(self, entries: Sequence[Entry], before_index: Callable[[bool], None] | None = None) -> _Run:
        """Plan the run, fingerprint what changes, write records and buckets (one exchange, after
        ``before_index``), and look the queries up (read only, after the writes: a query sees the documents
        of its batch before it)."""
        gw = self.gateway
        flights = self.inflight([e.doc_id for e in entries]) if self.inflight is not None else None
        states = gw.states(
            [(e.doc_id, e.op not in (Op.DELETE, Op.QUERY), e.entry_id) for e in entries], flights
        )
        steps = plan(entries, states)
        requests = [s.request for s in steps]
        computed = iter(gw.fingerprinter.compute([r for r in requests if r is not None]))
        new: list[Fingerprint | None] = []
        for s, req in zip(steps, requests, strict=True):
            if req is not None:
                new.append(next(computed))
            else:
                new.append(s.old.fingerprint if s.action is Action.REJOIN and s.old is not None else None)
        old = [s.old.fingerprint if s.old is not None and s.action is Action.APPLY else None for s in steps]
        bands = self._band_hashes(old + new)
        writes, at, refused = [], [], {}
        for i, s in enumerate(steps):
            if s.writes:
                w = doc_write(s, new[i], bands[i], bands[len(steps) + i], gw.spec.store_shingles)
                if (why := too_large(w.record, self.settings.max_stored_bytes)) is not None:
                    refused[i], new[i], bands[len(steps) + i] = why, None, _NO_BANDS
                    steps[i] = Step(s.entry, Action.SKIP, s.num, s.old, s.live, False)
                    continue
                writes.append(w)
                at.append(i)
        found: list[Packed | None] = [NO_IDS] * len(steps)
        deletes = any(s.writes and s.entry.op is Op.DELETE for s in steps)
        applied, hits = gw.apply(writes, None if before_index is None else lambda: before_index(deletes))
        written = []  # (later batches read them: remembered once this one is verified, _process_run)
        for i, w, f in zip(at, writes, applied, strict=True):
            found[i] = f
            if f is not None and f.size and w.record is not None and (fp := new[i]) is not None:
                written.append((w.num, w.record, i, fp))  # (its Record made by the worker, later)
        hits = _by_step(hits, np.array(at, dtype=np.int64))
        gw.forget(
            [
                (s.entry.doc_id, s.num, s.entry.entry_id)
                for s, f in zip(steps, found, strict=True)
                if s.action is Action.APPLY and s.entry.op is Op.DELETE and f is not None
            ]
        )
        queries = [i for i, s in enumerate(steps) if s.action is Action.QUERY and bands[len(steps) + i].size]
        for i, f in zip(queries, gw.peek([bands[len(steps) + i] for i in queries]), strict=True):
            found[i] = f
        return _Run(steps, new, bands[len(steps) :], found, refused, hits, written)

    def _band_hashes(self, fps: Sequence[Fingerprint | None]) -> list[U64Array]:
        """Band hashes of each fingerprint, in one vectorized call (empty for None or an empty document)."""
        use = [i for i, fp in enumerate(fps) if fp is not None and not fp.empty]
        hashes = self.gateway.fingerprinter.band_hashes([fps[i] for i in use])  # type: ignore[misc]
        out = [_NO_BANDS] * len(fps)
        for row, i in enumerate(use):
            out[i] = hashes[row]
        return out

    # ----- verification -----
    def _verify(self, run: _Run) -> Verification:
        """The verified matches of each step that wrote or queried (matching.verify_reads), by step index (the
        fingerprints and roots by integer id)."""
        own: dict[int, tuple[str, Fingerprint]] = {}
        reads: dict[int, tuple[Packed, int]] = {}
        key_of: dict[int, int] = {}  # step index -> key (a query has no integer id: a negative key)
        created: list[int] = []  # written, with no record before (a delete has no fingerprint): new ids
        for i, (s, fp, f) in enumerate(zip(run.steps, run.new, run.found, strict=True)):
            if fp is None or f is None or not (s.writes or s.action is Action.QUERY):
                continue
            key = s.num if s.writes else -(i + 1)
            own[key], key_of[i] = (s.entry.doc_id, fp), key
            if f.size:
                reads[key] = (f, s.num)  # a query with an indexed document's id is not compared with it
            if s.writes and s.old is None:
                created.append(s.num)
        self.gateway.created(created)  # no root lookups for them
        batch = self._batch_entries(run)  # sorted once, for both looks
        later: dict[int, Packed] = {}  # by step index: batch reads verified after the buckets' candidates
        for i, earlier in self._batch_neighbours(run, batch, BATCH_NEIGHBOURS).items():
            f, num = reads.get(run.steps[i].num, (NO_IDS, run.steps[i].num))
            if f.size > VERIFIED_PER_CLUSTER and len(set(f.tolist())) > VERIFIED_PER_CLUSTER:
                later[i] = earlier  # a crowd in its buckets: maybe a cluster it verifies enough of there
            else:
                reads[num] = (np.concatenate([f, earlier]), num)
        got = verify_reads(self.gateway, own, reads)
        if later:
            got.add(verify_reads(self.gateway, own, self._batch_reads(run, later, got)))
        self._look_further(run, batch, own, key_of, got)
        by_key = {key: i for i, key in key_of.items()}
        return Verification(
            {by_key[k]: m for k, m in got.matches.items()},
            {by_key[k]: c for k, c in got.candidates.items()},
            {by_key[k]: r for k, r in got.read.items()},
            got.roots,
        )

    def _batch_reads(
        self, run: _Run, neighbours: dict[int, Packed], got: Verification
    ) -> dict[int, tuple[Packed, int]]:
        """By integer id, the ``neighbours`` (by step index: the nearest earlier documents of the run with a
        band hash in common, one per band, as a bucket would hold them) as bucket reads, less those verified
        already and those in a cluster of which the document verified ``VERIFIED_PER_CLUSTER`` candidates
        already (each matched one of the clusters it matched in its buckets, as a flood's copies do)."""
        roots, matches = got.roots, got.matches
        joined: dict[int, set[int]] = {}  # by document: the roots of its matches (computed once)

        def joins(w: int) -> set[int]:
            if (known := joined.get(w)) is None:
                known = joined[w] = {roots.get(m[2], m[2]) for m in matches.get(w, ())}
            return known

        out: dict[int, tuple[Packed, int]] = {}
        for i, earlier in neighbours.items():
            num = run.steps[i].num
            ids = earlier.tolist()
            seen = got.candidates.get(num, _NO_IDS_SET)
            distinct = set(ids)  # (a read repeats: one per band)
            rest = distinct.difference(seen)
            if rest and len(seen) >= VERIFIED_PER_CLUSTER and (full := _full_clusters(seen, roots)):
                rest = {w for w in rest if full.isdisjoint(joins(w))}
            if not rest:
                continue
            if len(rest) < len(distinct):
                earlier = np.array([w for w in ids if w in rest], dtype=np.uint32)
            out[num] = (earlier, num)
        return out

    def _look_further(
        self,
        run: _Run,
        batch: _BatchEntries,
        own: dict[int, tuple[str, Fingerprint]],
        key_of: dict[int, int],
        got: Verification,
    ) -> None:
        """The documents of the run that wrote and matched nothing look further back in the batch: at the
        nearest ``bucket_members`` earlier documents of each band they share (what a bucket holds), not yet
        verified. The nearest one of a band can be under the threshold and the duplicate behind it (copies of
        a story edited apart); a flood's copies match at once and never pay for it. Adds to ``got`` (keys as
        its own: integer ids)."""
        writers = {i for i, key in key_of.items() if run.steps[i].writes and key not in got.matches}
        depth = self.gateway.bounds.bucket_members
        deeper = self._batch_neighbours(run, batch, depth, writers) if writers else {}
        reads: dict[int, tuple[Packed, int]] = {}
        for i, ids in deeper.items():
            num = run.steps[i].num
            seen = got.candidates.get(num, set())
            if fresh := [n for n in ids.tolist() if n not in seen]:
                reads[num] = (np.array(fresh, dtype=np.uint32), num)
        if reads:
            got.add(verify_reads(self.gateway, own, reads))

    def _batch_entries(self, run: _Run) -> _BatchEntries:
        """The steps of the run whose documents were written with band hashes, and the band hashes they
        share (bounds.shared_entries)."""
        rows = [
            i
            for i, (s, f) in enumerate(zip(run.steps, run.found, strict=True))
            if s.writes and f is not None and run.bands[i].size and run.new[i] is not None
        ]
        if len(rows) < 2:
            return rows, _NO_SHARED
        return rows, shared_entries(pad_rows([run.bands[i] for i in rows]), self.spec.bands)

    def _batch_neighbours(
        self, run: _Run, batch: _BatchEntries, depth: int, only: set[int] | None = None
    ) -> dict[int, Packed]:
        """By step index (of ``only``, when given), the integer ids of the ``depth`` nearest earlier documents
        of the run with a band hash in common, and of the ``bucket_members`` nearest with a shingle prefix
        in common (bounds.batch_predecessors): a JOIN reads what a bucket held before the run."""
        rows, shared = batch
        if len(rows) < 2:
            return {}
        if only is None:
            later, earlier = predecessors(shared, depth, self.spec.bands, self.gateway.bounds.bucket_members)
        else:
            wanted = np.array([at for at, i in enumerate(rows) if i in only], dtype=np.int64)
            later, earlier = nearest_earlier(shared, wanted, depth)
        if not later.size:
            return {}
        nums = np.array([run.steps[i].num for i in rows], dtype=np.uint32)
        order = np.argsort(later, kind="stable")
        later, ids = later[order], nums[earlier[order]]
        starts = np.flatnonzero(np.diff(later, prepend=-1)).tolist()
        ends = [*starts[1:], later.size]
        return {rows[int(later[a])]: ids[a:b] for a, b in zip(starts, ends, strict=True)}

    # ----- outputs -----
    def _basket(self, e: Entry, links: list[str]) -> list[str] | None:
        """The basket entry's fields after ``id``, or None when the entry writes no basket."""
        mode = self.settings.baskets
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

    def _emit_outputs(
        self,
        run: _Run,
        done: list[int],
        verified: Verification,
        result: BatchResult,
        evicted: Callable[[], None] | None = None,
        unioned: Callable[[], None] | None = None,
    ) -> None:
        """Evictions, unions, alerts, baskets and replies of a run's steps ``done``. When ``evicted`` is given,
        the evictions go first, in an exchange of their own, then ``evicted()``: the next batch may write its
        buckets and records (it reads the buckets as this batch leaves them). The unions follow (in the same
        exchange as the evictions without ``evicted``), then ``unioned()``: a next batch that deletes waits
        for that (a root it deletes keeps its name for this batch's alerts)."""
        gw, s = self.gateway, self.settings
        steps, matches = run.steps, verified.matches
        alerting = [(i, steps[i]) for i in done if i in matches and steps[i].action is not Action.QUERY]
        roots: list[str] = []
        named: dict[int, list[Found]] = {}
        names: dict[int, str] = {}
        groups: list[tuple[int, list[int]]] = []
        earlier: list[tuple[list[int], list[int]]] = []
        read: set[int] = set()  # the ids the alerting documents read
        if alerting:
            names = {m[2]: m[0] for i, _ in alerting for m in matches[i]}
            names.update((step.num, step.entry.doc_id) for _, step in alerting)
            read = read.union(*(verified.read.get(i, ()) for i, _ in alerting))
            self._add_roots(read, verified)
            groups = [(step.num, [m[2] for m in matches[i]]) for i, step in alerting]
            earlier = earlier_clusters(groups, verified.roots)  # one union per distinct root, not per match
        # the clusters as the unions will leave them (one more consumer's merges aside): EVICT only groups by them
        joined = [
            (num, list(dict.fromkeys(before))) for (num, _), (before, _) in zip(groups, earlier, strict=True)
        ]
        merged = [(num, min(verified.roots.get(num, num), *rs), rs) for num, rs in joined]
        pipe = ScriptPipeline(gw.client)
        gw.evict(pipe, self._evictions(run, alerting, merged, verified, read))
        if evicted is not None:  # the next batch waits for the evictions alone
            if len(pipe):
                pipe.execute()
            evicted()
        if alerting:
            unions = gw.union(
                [
                    (num, [(m, names[m]) for m in best])
                    for (num, _), (_, best) in zip(groups, earlier, strict=True)
                ],
                pipe,
                names,
                [root for _, root, _ in merged],
            )
            # (before the next batch may write: it can delete a root; read with the unions when expected)
            roots = gw.cluster_names([root for root, _ in unions], names)
        if unioned is not None:
            unioned()
        out: list[Emitted] = []
        for (i, step), root, (before, _) in zip(alerting, roots, earlier, strict=True):
            named[i] = alert_matches(matches[i], before, gw.bounds.max_matches)
            e = step.entry
            alert = Alert(
                e.doc_id,
                named[i],
                root,
                e.entry_id,
                self.spec.verify,
                e.source,
                e.meta,
            )
            result.alerts.append(alert)
            out.append((e.entry_id, alert.fields()))
        gw.emit(pipe, gw.keys.alerts, s.alerts_retention, s.seen_ttl_s, out)
        entries = [steps[i].entry for i in done if steps[i].action is not Action.QUERY]
        if s.baskets == "items":  # (the default: only the entries that name their items have one)
            entries = [e for e in entries if e.items is not None]
        links: dict[str, list[str]] = {}  # (a basket of sources only: the ids a document duplicates)
        if s.baskets == "sources":
            links = {steps[i].entry.entry_id: [m[0] for m in named[i]] for i, _ in alerting}
        baskets = [
            (e.entry_id, ["id", e.doc_id, *b])
            for e in entries
            if (b := self._basket(e, links.get(e.entry_id, _NO_LINKS))) is not None
        ]
        gw.emit(pipe, gw.keys.baskets, s.basket_retention, s.seen_ttl_s, baskets)
        queries = [steps[i].entry for i in done if steps[i].action is Action.QUERY]
        self._replies(pipe, queries, {steps[i].entry.entry_id: m for i, m in matches.items()})
        result.queries += len(queries)
        pipe.execute()

    def _add_roots(self, read: set[int], verified: Verification) -> None:
        """The cluster roots, before this run's unions, of the ids the alerting documents ``read`` (one lookup)."""
        wanted = read - verified.roots.keys()
        if wanted:
            nums = sorted(wanted)
            verified.roots.update(zip(nums, self.gateway.roots(nums), strict=True))

    def _evictions(
        self,
        run: _Run,
        alerting: list[tuple[int, Step]],
        merged: list[tuple[int, int, list[int]]],
        verified: Verification,
        read: set[int],
    ) -> Evictions:
        """lua.EVICT's rows: per bucket and cluster that a document of this run joined where it was there
        already (run.hits), the cluster's newest documents of the run in it (bounds.eviction_rows), and per
        cluster the members known to be in it: the run's documents and the ids they read whose cluster they
        joined (roots before the run, ``merged`` by its unions: per alerting document, its root after its
        union and the roots it merged). A document a bucket refused that alerted nothing is a cluster of its
        own (EVICT puts it in)."""
        final = merged_roots(merged)
        cluster_of = np.full(len(run.steps), -1, dtype=np.int64)  # by step index; -1: none
        nums = np.zeros(len(run.steps), dtype=np.int64)
        for i, step in alerting:
            if step.writes:
                cluster_of[i], nums[i] = final[step.num], step.num
        hits = run.hits
        for i in np.unique(hits.write[hits.refused]).tolist():
            if cluster_of[i] < 0:  # refused, alerted nothing: its own cluster, or one a later union made
                num = nums[i] = run.steps[i].num
                cluster_of[i] = final.get(num, num)
        sel = np.flatnonzero(cluster_of[hits.write] >= 0)
        if not sel.size:
            return _NO_EVICTIONS
        at = hits.write[sel]
        bucket = (hits.key[sel] << 32) | hits.field[sel].astype(np.int64)
        sel = sel[eviction_rows(bucket, nums[at], cluster_of[at], KEPT_PER_CLUSTER)]
        at = hits.write[sel]
        roots, cluster = np.unique(cluster_of[at], return_inverse=True)
        known: dict[int, list[int]] = {int(r): [] for r in roots.tolist()}
        root_of = verified.roots
        for n in read:
            if (r := final.get(root_of.get(n, n))) is not None and r in known:
                known[r].append(n)
        for i, s in enumerate(run.steps):
            if s.writes:
                r = int(cluster_of[i]) if cluster_of[i] >= 0 else final.get(root_of.get(s.num, s.num))
                if r is not None and r in known:
                    known[r].append(s.num)
        # a cluster of KEPT_PER_CLUSTER known members or fewer has nothing to evict anywhere, nor to put in
        # unless a bucket refused one of them
        refused = np.zeros(roots.size, dtype=bool)
        refused[cluster[hits.refused[sel]]] = True
        crowded = refused | np.array([len(set(known[int(r)])) > KEPT_PER_CLUSTER for r in roots.tolist()])
        if not crowded.any():
            return _NO_EVICTIONS
        keep = np.flatnonzero(crowded[cluster])
        used, cluster = np.unique(cluster[keep], return_inverse=True)
        sel, at = sel[keep], at[keep]
        members = [np.array(known[int(roots[u])], dtype="<u4").tobytes() for u in used.tolist()]
        return Evictions(hits.names, hits.key[sel], hits.field[sel], cluster, nums[at], members)

    def _replies(self, pipe: ScriptPipeline, queries: list[Entry], matches: dict[str, list[Found]]) -> None:
        """Queue the verdicts of the queries, one call per reply stream."""
        if not queries:
            return
        hits = [matches.get(q.entry_id, []) for q in queries]
        by_stream: dict[str, list[Emitted]] = {}
        for q, (found, cluster) in zip(queries, cluster_of(self.gateway, hits), strict=True):
            verdict = Verdict(
                q.doc_id, tuple(Match(m[0], m[1]) for m in found), cluster, self.spec.verify, q.entry_id
            )
            assert q.reply_to is not None
            by_stream.setdefault(q.reply_to, []).append((q.entry_id, verdict.fields()))
        for name, entries in by_stream.items():
            self.gateway.reply(pipe, name, self.settings.reply_maxlen, self.settings.reply_ttl_s, entries)
