"""What the gateway reads of one document before a batch changes it, and the order of stream entry ids.

>>> DocState(num=1, record=None, tombstone="5-0").version
'5-0'
>>> sid("1700000000000-3") < sid("1700000000001-0")
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from dedupd.index.record import Record


def sid(entry_id: str) -> tuple[int, int]:
    """Sortable form of a stream entry id ``ms-seq``."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True, slots=True)
class DocState:
    """What the gateway read of one document."""

    num: int  # integer id (0: none, and none created)
    record: Record | None  # the live record
    tombstone: str | None  # the entry id of the delete that last removed it, while its tombstone lasts
    inflight: tuple[str, ...] = ()  # its entries delivered to the group and not yet acknowledged
    expiring: bool = False  # a daemon is expiring it (retention.py): its entries wait

    @property
    def stale(self) -> bool:
        """The record is older than the delete that removed the document: a generation being rebuilt holds
        what the serving one deleted (the delete is still to be replayed into it)."""
        return (
            self.record is not None
            and self.tombstone is not None
            and sid(self.record.entry_id) < sid(self.tombstone)
        )

    @property
    def live(self) -> Record | None:
        """The record, unless it is stale."""
        return None if self.stale else self.record

    @property
    def version(self) -> str | None:
        """The stream id of the newest entry applied to the document, if known."""
        known = [v for v in (self.record.entry_id if self.record else None, self.tombstone) if v]
        return max(known, key=sid) if known else None


def tombstone(raw: bytes | str | None) -> tuple[str | None, int]:
    """A tombstone '<version> <n>' as (version, the integer id it had); (None, 0) when there is none.

    >>> tombstone(b"5-0 12"), tombstone(None)
    (('5-0', 12), (None, 0))
    """
    if not raw:
        return None, 0
    version, _, num = (raw.decode() if isinstance(raw, bytes) else raw).partition(" ")
    return version, int(num or 0)


def states_of(
    requests: Sequence[tuple[str, bool, str]],
    resolved: Sequence[tuple[int, bytes | str | None, int]],
    load: Callable[[Iterable[int]], dict[int, Record | None]],
    flights: Sequence[tuple[str, ...]] | None,
) -> list[DocState]:
    """Each document's state from what resolving its id gave (its integer id, negative when none was created,
    its tombstone, and 1 when it is being expired) and its record (``load``: the records of integer ids, in one exchange). The record a
    delete removed is found through its tombstone, when the id is forgotten or the entry is not newer than
    the delete (a generation being rebuilt may still hold that record)."""
    nums = [n for n, _, _ in resolved]
    tombs: list[str | None] = [None] * len(nums)
    for i, (_, raw, _) in enumerate(resolved):
        if raw:
            tombs[i], tomb_num = tombstone(raw)
            if not nums[i] or sid(requests[i][2]) <= sid(tombs[i] or ""):
                nums[i] = tomb_num
    records = load(n for n in nums if n > 0)
    get, none = records.get, ()
    return [
        DocState(
            abs(n),
            get(n) if n > 0 else None,
            tombs[i],
            flights[i] if flights else none,
            bool(int(resolved[i][2])),
        )
        for i, n in enumerate(nums)
    ]
