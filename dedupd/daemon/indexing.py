"""The first stages of a run of entries with distinct document ids: plan, fingerprint, index.

:func:`plan_run` reads the documents' stored state and decides what each entry does (planner.py);
:func:`fingerprint` computes what changes (the documents after the steps, their band hashes, the record
and bucket writes; a document that would be stored larger than ``max_stored_bytes`` is left as it was);
:func:`index` writes the records and buckets in one exchange, forgets deleted documents and the ids given
to new documents refused before anything of them was written (:func:`unwritten_ids`), and looks the queries
up (read only, after the writes: a query sees the documents of its batch before it). Each returns a new
value; the :class:`~dedupd.daemon.batch.Run` that comes out is what verification starts from.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.daemon.batch import Run
from dedupd.daemon.entries import Entry, Op
from dedupd.daemon.handoff import Handoff
from dedupd.daemon.planner import Action, Step, doc_write, plan
from dedupd.index.buckets import DocWrite, Hits
from dedupd.index.protocol import NO_IDS, Gateway, Packed
from dedupd.similarity.fingerprint import Fingerprint
from dedupd.similarity.hashing import U64Array

_NO_BANDS = np.zeros(0, dtype=np.uint64)


@dataclass(frozen=True, slots=True)
class Fingerprinted:
    """A planned run with what changes computed: per step the document after it and the band hashes of the
    documents before and after it; the writes to send (``at``: the step of each) and the steps refused."""

    steps: list[Step]
    new: list[Fingerprint | None]
    old_bands: list[U64Array]
    new_bands: list[U64Array]
    writes: list[DocWrite]
    at: list[int]
    refused: dict[int, str]

    @property
    def deletes(self) -> bool:
        """Whether a write deletes a document."""
        return any(self.steps[i].entry.op is Op.DELETE for i in self.at)


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


def unwritten_ids(steps: Sequence[Step], refused: Iterable[int]) -> list[tuple[str, int]]:
    """The (doc id, integer id) of the ``refused`` steps whose document has no record: their ids were given
    out (resolve_ids.lua) for a document of which nothing was written, and are released (else each refused new
    id would stay in the id map for ever). An id whose document has a record keeps it.

    >>> new = Step(Entry("1-0", Op.UPSERT, "big", "...", None, None, None), Action.SKIP, 7, None)
    >>> unwritten_ids([new], [0])
    [('big', 7)]
    """
    return [(steps[i].entry.doc_id, steps[i].num) for i in refused if steps[i].old is None and steps[i].num]


def plan_run(gw: Gateway, entries: Sequence[Entry], flights: Sequence[tuple[str, ...]] | None) -> list[Step]:
    """What each entry does, from its document's stored state (``flights``: the documents' entries in flight,
    from the consumer stream; None when entries are replayed in order, as a rebuild does)."""
    states = gw.states([(e.doc_id, e.op not in (Op.DELETE, Op.QUERY), e.entry_id) for e in entries], flights)
    return plan(entries, states)


def fingerprint(gw: Gateway, planned: Sequence[Step], max_stored_bytes: int) -> Fingerprinted:
    """The documents after each step (fingerprinted in one call), their band hashes, and the writes."""
    steps = list(planned)
    requests = [s.request for s in steps]
    computed = iter(gw.fingerprinter.compute([r for r in requests if r is not None]))
    new = [
        next(computed)
        if req is not None
        else (s.old.fingerprint if s.action is Action.REJOIN and s.old is not None else None)
        for s, req in zip(steps, requests, strict=True)
    ]
    old = [s.old.fingerprint if s.old is not None and s.action is Action.APPLY else None for s in steps]
    bands = band_hashes(gw, old + new)
    old_bands, new_bands = bands[: len(steps)], bands[len(steps) :]
    writes, at, refused = [], [], {}
    for i, s in enumerate(steps):
        if not s.writes:
            continue
        w = doc_write(s, new[i], old_bands[i], new_bands[i], gw.spec.store_shingles)
        if (why := too_large(w.record, max_stored_bytes)) is not None:
            refused[i], new[i], new_bands[i] = why, None, _NO_BANDS
            steps[i] = Step(s.entry, Action.SKIP, s.num, s.old, s.live, False)
            continue
        writes.append(w)
        at.append(i)
    return Fingerprinted(steps, new, old_bands, new_bands, writes, at, refused)


def band_hashes(gw: Gateway, fps: Sequence[Fingerprint | None]) -> list[U64Array]:
    """Band hashes of each fingerprint, in one vectorized call (empty for None or an empty document)."""
    use = [i for i, fp in enumerate(fps) if fp is not None and not fp.empty]
    hashes = gw.fingerprinter.band_hashes([fps[i] for i in use])  # type: ignore[misc]
    out = [_NO_BANDS] * len(fps)
    for row, i in enumerate(use):
        out[i] = hashes[row]
    return out


def index(gw: Gateway, run: Fingerprinted, after: Handoff | None = None) -> Run:
    """Write the run's records and buckets (one exchange, once the batch in hand lets it: ``after``), forget
    its deleted documents and the ids given to refused new ones, and look its queries up."""
    steps = run.steps
    prepared = gw.prepare(run.writes)
    if after is not None:
        after.wait(run.deletes)
    applied, hits = gw.apply(prepared)
    found: list[Packed | None] = [NO_IDS] * len(steps)
    written = []  # (later batches read them: remembered once this one is verified)
    for i, w, f in zip(run.at, run.writes, applied, strict=True):
        found[i] = f
        if f is not None and f.size and w.record is not None and (fp := run.new[i]) is not None:
            written.append((w.num, w.record, i, fp))  # (its Record made by the worker, later)
    gw.forget(
        [
            (s.entry.doc_id, s.num, s.entry.entry_id)
            for s, f in zip(steps, found, strict=True)
            if s.action is Action.APPLY and s.entry.op is Op.DELETE and f is not None
        ]
    )
    gw.release(unwritten_ids(steps, run.refused))
    queries = [i for i, s in enumerate(steps) if s.action is Action.QUERY and run.new_bands[i].size]
    for i, f in zip(queries, gw.peek([run.new_bands[i] for i in queries]), strict=True):
        found[i] = f
    step_hits = by_step(hits, np.array(run.at, dtype=np.int64))
    return Run(steps, run.new, run.new_bands, found, run.refused, step_hits, written)


def by_step(hits: Hits, step_of: npt.NDArray[np.int64]) -> Hits:
    """``hits`` with each write's index replaced by its step's (``step_of``: by write); a write of Redis
    Cluster leftovers (-1) has none."""
    kept = hits[np.flatnonzero(hits.write >= 0)]
    return Hits(kept.names, kept.key, kept.field, step_of[kept.write], kept.refused, kept.full)
