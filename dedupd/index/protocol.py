"""The seam between a batch and the index: the :class:`Gateway` protocol a batch's stages talk to.

:class:`~dedupd.index.gateway.RedisGateway` implements it on Redis (single node or Cluster), and
:class:`~dedupd.index.memory.MemoryGateway` in memory, so that the daemon's decisions (planning, candidate
selection, evictions, outputs) are tested without a server, the same cases run against both (the habit of
datasketch's storage backends, dramatiq's ``StubBroker`` and httpx's ``MockTransport``).

An *exchange* collects writes that go to the server together (one pipelined round trip on Redis, in order);
nothing queued in one is applied before its :meth:`Exchange.execute`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from dedupd.index.buckets import DocWrite, Evictions, Hits, Placements
from dedupd.index.docstate import DocState
from dedupd.index.keys import Keys
from dedupd.index.record import Record
from dedupd.index.retention import Claim
from dedupd.similarity.bounds import Bounds
from dedupd.similarity.fingerprint import Fingerprinter
from dedupd.similarity.hashing import U64Array
from dedupd.similarity.spec import IndexSpec

Emitted = tuple[str, list[Any]]  # (input entry id, field/value list) of one output entry
Packed = npt.NDArray[np.uint32]  # the ids read from a document's buckets, one per shared band
NO_IDS: Packed = np.zeros(0, dtype=np.uint32)  # no ids read
APPLY_CHUNK = 64  # documents per bucket call (one 256-document script took 30-70 ms on Redis; 128 up to 46)
Applied = tuple[list[Packed | None], Hits]  # per write its bucket reads (None: its record had changed); hits


class ClusterReps(NamedTuple):
    """What REPRESENTATIVES says of one cluster: its root now, its representatives (most matched first),
    whether it has a ring (two members or more), the nodes a walk of the ring met after the root (the most
    recently joined first), and whether they are all of them."""

    root: int
    members: list[int]
    ring: bool
    walked: list[int]
    whole: bool = False


@dataclass(frozen=True, slots=True)
class Unions:
    """What :meth:`Gateway.union` did: per group, the root of the document's cluster after its union and the
    root each of its matches had before (its earlier cluster); and the names of the roots asked for."""

    clusters: list[tuple[int, list[int]]]
    names: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RecordsRead:
    """Records read in one exchange: the decoded ones asked for (None: no record), and the stored bytes of
    every id read in it (those read ahead included: a later read in the same batch takes them from here)."""

    records: dict[int, Record | None]
    stored: dict[int, bytes | None]


class Exchange(Protocol):
    """Writes queued to go to the server together."""

    def __len__(self) -> int: ...

    def execute(self) -> list[Any]:
        """Send what is queued, in order; the replies."""


class Prepared(Protocol):
    """A batch's record and bucket writes, packed and ready to send (:meth:`Gateway.prepare`)."""


class Gateway(Protocol):
    """Everything a batch asks of one index generation (see the module docstring)."""

    keys: Keys
    spec: IndexSpec
    bounds: Bounds
    fingerprinter: Fingerprinter
    serving: bool  # a generation being built by a rebuild forgets no ids and emits nothing
    holds_ids: bool  # a rebuild runs: the ids of refused documents stay (its replay may write them)

    def exchange(self) -> Exchange:
        """A new, empty exchange."""

    # ----- reading -----
    def states(
        self, requests: Sequence[tuple[str, bool, str]], flights: Sequence[tuple[str, ...]] | None = None
    ) -> list[DocState]:
        """The stored state of each (doc id, create, entry id); integer ids created for ``create``."""

    def load_records(self, nums: Iterable[int]) -> dict[int, Record | None]:
        """The records of ``nums``, in one exchange."""

    def load_leaving(self, nums: Sequence[int]) -> dict[int, Record | None]:
        """The records of documents about to leave (an expiry step's), in one exchange, decoded without
        being kept in the decode cache (they would push out the records a flood's copies verify)."""

    def read_records(
        self, nums: Iterable[int], ahead: Sequence[int] = (), held: Mapping[int, bytes | None] | None = None
    ) -> RecordsRead:
        """The records of ``nums`` (those ``held`` taken from it, not read again), and the stored bytes of
        ``ahead`` read with them when some must be read."""

    def remember(self, num: int, blob: bytes, record: Record) -> None:
        """Keep a record just written as if read."""

    def peek(self, bands: Sequence[U64Array]) -> list[Packed]:
        """The integer ids in each band-hash row's buckets (one per shared bucket), joining nothing."""

    def roots(self, nums: Sequence[int], fresh: bool = False) -> list[int]:
        """The root of each document's cluster (``fresh``: not from what this process saw a moment ago)."""

    def representatives(self, roots: Sequence[int], ring: int = 0) -> list[ClusterReps]:
        """Per cluster root (as known: one merged since is followed), the root now, its representatives
        (most matched first), whether it has a ring, the first ``ring`` nodes of its ring after the root, the
        most recently joined first, and whether they are all of them (unionfind.py), in one exchange."""

    def cluster_names(self, roots: Sequence[int], known: Mapping[int, str]) -> list[str]:
        """Each cluster's name: its root document's id (from ``known`` or read), ``#n`` when it is gone."""

    # ----- writing -----
    def prepare(self, writes: Sequence[DocWrite]) -> Prepared:
        """Pack a batch's writes (nothing is sent)."""

    def apply(self, prepared: Prepared) -> Applied:
        """Send prepared writes: records and buckets of every document, in batch order."""

    def forget(self, deleted: Sequence[tuple[str, int, str]]) -> None:
        """Deleted documents (doc id, integer id, the delete's entry id): ids, union-find nodes, tombstones."""

    def release(self, refused: Sequence[tuple[str, int]]) -> None:
        """Ids given to documents refused before anything of them was written (doc id, integer id): forgotten
        while they still map to it (serving generation only, and none while a rebuild runs: ``holds_ids``)."""

    def created(self, nums: Sequence[int]) -> None:
        """Documents a batch has just created: each its own root until unions take it in."""

    def forget_roots(self) -> None:
        """Forget every root known (after a server error)."""

    def evict(self, exchange: Exchange, ev: Evictions) -> None:
        """Queue the evictions of a batch (bounds.eviction_rows's rows)."""

    def displace(self, exchange: Exchange, pl: Placements) -> None:
        """Queue the placements of a batch's documents kept out of most of their buckets (bounds.thin)."""

    def union(
        self,
        groups: Sequence[tuple[int, Sequence[tuple[int, str]]]],
        exchange: Exchange,
        unnamed: Iterable[int] = (),
    ) -> Unions:
        """After what ``exchange`` holds, union each document with its matches and send it all; the names
        of the ``unnamed`` roots are read in the same exchange, before the unions."""

    def emit(
        self, exchange: Exchange, stream: str, retention: int, ttl_s: int, entries: Sequence[Emitted]
    ) -> None:
        """Queue appending each (input entry id, fields) to ``stream``, once per input entry id."""

    def reply(
        self, exchange: Exchange, name: str, maxlen: int, ttl_s: int, entries: Sequence[Emitted]
    ) -> None:
        """Queue the verdicts of one reply stream."""

    def count(self, counts: Mapping[str, int]) -> None:
        """Add to the index's counters (processed, alerts, dead, queries)."""

    # ----- the retention window (retention.py) -----
    def touch(self, exchange: Exchange, nums: Sequence[int]) -> None:
        """Queue touching documents a later document's alert named (those with a touch time only)."""

    def claim_expiry(self, limit: int, lease_ms: int) -> Claim:
        """Claim at most ``limit`` documents past the window (lapsed claims first) for ``lease_ms``."""

    def note_expiry(self, deadline: int, notes: Sequence[tuple[int, str]]) -> None:
        """Note the document id of each claimed (integer id, document id), while the claim is still ours."""

    def finish_expiry(self, deadline: int, done: Sequence[tuple[int, str, str]]) -> int:
        """End a claim: per (integer id, document id, outcome) forget the expired, put back the kept; returns
        how many expired."""
