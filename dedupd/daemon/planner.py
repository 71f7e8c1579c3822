"""What each entry of a batch does to its document (pure: no Redis).

The gateway reads the stored state of a run's documents (:class:`DocState`: record, tombstone, entries in
flight); :func:`decide` says, per entry, whether it applies, was applied already, is superseded, or must
wait; :func:`plan` turns that into :class:`Step` s, and :func:`doc_write` turns a step and its fingerprints
into the :class:`~dedupd.index.buckets.DocWrite` that the gateway sends.

Per-document order: the final state of a document is what its entries give applied in stream order,
whichever consumer processes which entry and in whatever order they finish. The mechanism:

- every document's state carries a *version*: the stream id of the last entry applied to it (the record's
  input entry id, or the tombstone a delete leaves for ``tombstone_ttl_s``);
- an entry not newer than the version was applied already (a redelivery) or superseded: it changes nothing;
- an entry waits (:attr:`Action.DEFER`) while its document is being expired (a retention window: the
  expiry comes first, and the entry finds no document);
- an entry newer than the version waits while an older entry of the same document
  is in flight (delivered to the consumer group, not yet acknowledged) and newer than the version, i.e. not
  yet applied. Entries are recorded as in flight in the script that delivers them (lua.READ), and the lookup
  a batch decides with (lua.LOOKUP_INFLIGHT) first checks, atomically, that every pending entry of the group
  is recorded (else it rebuilds the record from them); delivery follows stream order, so no older entry
  can appear after the check.

Example: ``upsert X`` (1-0) is held by a consumer that dies; another consumer reads ``append X`` (2-0):

>>> from dedupd.daemon.entries import Entry, Op
>>> append = Entry("2-0", Op.APPEND, "X", "B", None, None, None)
>>> decide(append, DocState(num=1, record=None, tombstone=None, inflight=("1-0", "2-0")))
<Action.DEFER: 'defer'>
>>> decide(append, DocState(num=1, record=None, tombstone=None, inflight=("2-0",)))
<Action.APPLY: 'apply'>
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from dedupd.daemon.entries import Entry, Op
from dedupd.index.buckets import DocWrite
from dedupd.index.docstate import DocState, sid
from dedupd.index.record import Record, encode_record
from dedupd.similarity.fingerprint import AppendTo, Fingerprint
from dedupd.similarity.hashing import U64Array
from dedupd.similarity.lsh import left_behind


class Action(StrEnum):
    """What an entry does to its document."""

    APPLY = "apply"  # change the document as the entry says
    REJOIN = "rejoin"  # applied already and the document lives: its buckets are re-joined, its alert re-made
    SKIP = "skip"  # applied already or superseded, nothing to redo (a delete, or a deleted document)
    DEFER = "defer"  # an older entry of the document is in flight and not applied yet: wait for it
    QUERY = "query"  # compare with the index, change nothing


# the members as plain names: an Enum member looked up on its class costs a descriptor call (hot path)
_APPLY, _REJOIN, _SKIP, _DEFER, _QUERY = Action.APPLY, Action.REJOIN, Action.SKIP, Action.DEFER, Action.QUERY
_QUERY_OP, _DELETE_OP, _APPEND_OP = Op.QUERY, Op.DELETE, Op.APPEND
_WRITING = frozenset((_APPLY, _REJOIN))


def decide(entry: Entry, state: DocState) -> Action:
    """What ``entry`` does, given its document's stored state (see the module docstring)."""
    op = entry.op
    if op is _QUERY_OP:
        return _QUERY
    if state.expiring:  # its expiry is under way (index/retention.py): the entry comes after it
        return _DEFER
    if op is _DELETE_OP and state.stale:
        return _APPLY  # the delete of this generation's stale record
    eid = entry.entry_id
    others = [o for o in state.inflight if o != eid]
    if state.record is None and state.tombstone is None:  # the usual case: a document not seen yet
        return _DEFER if others and any(sid(o) < sid(eid) for o in others) else _APPLY
    t = sid(eid)
    version = state.version
    if version is not None and t <= sid(version):
        return _REJOIN if state.live is not None and op is not _DELETE_OP else _SKIP
    floor = sid(version) if version is not None else (-1, -1)
    return _DEFER if any(floor < sid(o) < t for o in others) else _APPLY


@dataclass(frozen=True, slots=True)
class Step:
    """One entry of a run and what it does."""

    entry: Entry
    action: Action
    num: int
    old: Record | None  # the record as read
    live: bool = True  # whether it is the document (not a stale record a delete will remove)
    writes: bool = (
        False  # whether it changes or re-joins the index (APPLY or REJOIN of a document with an id)
    )

    @property
    def expected(self) -> str:
        """The record's version as read ('' = none): the compare-and-set of the write."""
        return self.old.entry_id if self.old is not None else ""

    @property
    def request(self) -> str | AppendTo | None:
        """What to fingerprint: the text, the stored document and the chunk of an append, or nothing."""
        e, action = self.entry, self.action
        if action is _QUERY:
            return e.text
        if action is not _APPLY or e.op is _DELETE_OP:
            return None
        assert e.text is not None
        if e.op is _APPEND_OP and self.old is not None and self.live:
            return AppendTo(self.old.fingerprint, e.text)
        return e.text


def plan(entries: Sequence[Entry], states: Sequence[DocState]) -> list[Step]:
    """The steps of a run of entries with distinct document ids, given their documents' states."""
    out = []
    for e, s in zip(entries, states, strict=True):
        action = decide(e, s)
        out.append(Step(e, action, s.num, s.record, not s.stale, action in _WRITING and s.num > 0))
    return out


def doc_write(
    step: Step, new: Fingerprint | None, old_bands: U64Array, new_bands: U64Array, store_shingles: bool
) -> DocWrite:
    """The index writes of one step.

    Args:
        step: a step that writes (APPLY or REJOIN with an integer id).
        new: the document's fingerprint after the step (None for a delete).
        old_bands: the band hashes of the stored record (empty if none or empty).
        new_bands: the band hashes of ``new`` (empty if none or empty).
        store_shingles: whether records keep the shingle fingerprints.
    """
    w = DocWrite(step.num, expected=step.expected)
    if new is None:  # a delete: leave every bucket, delete the record
        w.remove, w.delete = old_bands, True
        return w
    w.add = new_bands
    w.rejoin = step.action is Action.REJOIN
    # leave only the buckets that change (0 = leave that band alone); a short document's shingle prefix
    # (past the LSH bands) may have grown or shrunk
    w.remove = left_behind(old_bands, new_bands)
    if step.action is Action.APPLY:
        e = step.entry
        w.record = encode_record(e.doc_id, new, e.entry_id, e.source, store_shingles)
    return w


def unique_runs(entries: Sequence[Entry]) -> list[list[Entry]]:
    """Split into consecutive runs in which no document id repeats (order kept)."""
    runs: list[list[Entry]] = [[]]
    seen: set[str] = set()
    for e in entries:
        if e.doc_id in seen:
            runs.append([])
            seen = set()
        runs[-1].append(e)
        seen.add(e.doc_id)
    return [r for r in runs if r]


def byte_runs(run: Sequence[Entry], max_bytes: int) -> list[list[Entry]]:
    """Split a run into consecutive parts whose texts (``Entry.size``: once normalised) add up to at most
    ``max_bytes`` each (a larger entry alone), so that fingerprinting a part takes memory bounded by it.

    >>> [len(p) for p in byte_runs([Entry(str(i), Op.UPSERT, str(i), "x", None, None, None, size=4) for i in range(5)], 8)]
    [2, 2, 1]
    """
    parts: list[list[Entry]] = [[]]
    used = 0
    for e in run:
        if parts[-1] and used + e.size > max_bytes:
            parts.append([])
            used = 0
        parts[-1].append(e)
        used += e.size
    return [p for p in parts if p]
