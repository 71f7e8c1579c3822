"""Cluster roots this process read or made a moment ago, by integer id (pure): a flood's batch looks up the
roots of the copies the batch before it unioned, and those it knows already, so that it needs no lookup.

What is kept is what the union-find said (unionfind.FIND_ROOTS) or did (unionfind.UNION_ROOTS: a document's
root after its union, and the roots it merged) in this process, plus the documents a batch has just created
and written (new ids: each its own root until a union takes it in). An id maps to a root it had; a root it
had maps to itself while it was one. An answer follows the chain down (roots are the oldest, smallest, ids: a
chain only goes down) and is an answer only when it ends at an id known to be a root, else the id is not
known.

Another consumer's unions can have merged a cluster since (also one of the documents created here, once
written): an answer is then a root the id had, not the root it has. Roots only merge (the union-find never
splits a cluster, and ids are not given out twice), so such a view is finer than Redis's, never coarser.
Every use of roots in a batch takes that, as when the roots were read just before the other consumer's
union: a cluster seen as two keeps more members in a bucket (within bucket_members), may be named twice in
an alert, and has the best candidate of each part verified first, so that with more distinct clusters
than ``max_candidates`` it can take the place of another cluster's. To keep that window short, everything
is forgotten every ``max_age_s`` seconds, and when ``max_entries`` are kept (bounded memory). A server that
restarted without its data gives the ids out again: the daemon forgets everything after a server error, and
a created id not above the last ones created here does the same.

Shared by the daemon's two threads (the main thread forgets deleted documents and, after a server error,
everything; the worker thread learns and looks up while it verifies a batch and writes its unions): every
method takes the instance's lock.

>>> roots = KnownRoots(clock=lambda: 0.0)
>>> roots.learn([(9, 4), (4, 4)])
>>> roots.get(9), roots.get(4), roots.get(5)
(4, 4, None)
>>> roots.learn([(4, 2), (2, 2)])  # a union merged 4's cluster into 2's
>>> roots.get(9)
2
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import cast

MAX_ENTRIES = 1 << 16  # about 5 MB of dict entries at most
MAX_AGE_S = 10.0  # everything kept is forgotten this often (another consumer's merges are seen after it)


class KnownRoots:
    """Roots by integer id, as this process last saw them (see the module docstring)."""

    def __init__(
        self,
        max_entries: int = MAX_ENTRIES,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries, self.max_age_s, self._clock = max_entries, max_age_s, clock
        self._root: dict[int, int] = {}
        self._since = clock()
        self._last_created = 0  # the largest id created here (ids go up unless the server lost them)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._root)

    def get(self, num: int) -> int | None:
        """The root ``num`` had when last seen, or None when that is not known."""
        with self._lock:
            return self._get(num)

    def lookup(self, nums: Sequence[int]) -> list[int | None]:
        """:meth:`get` of each of ``nums`` (after :meth:`expire`), under one hold of the lock."""
        with self._lock:
            self._expire()
            get = self._get
            return [get(n) for n in nums]

    def _get(self, num: int) -> int | None:
        root = self._root
        r = root.get(num)
        while r is not None:
            s = root.get(r)
            if s == r:
                return r
            if s is None or s > r:  # the chain ends at an id not known to be a root
                return None
            r = s
        return None

    def roots(self, nums: Sequence[int], find: Callable[[Sequence[int]], list[int]]) -> list[int]:
        """The root of each of ``nums``: from what is known, the others looked up with ``find`` (once, for
        the distinct ones; what it says is learned with :meth:`learn_found` by the caller's ``find``)."""
        seen = self.lookup(nums)
        if None not in seen:
            return cast(list[int], seen)
        missing = list(dict.fromkeys(n for n, r in zip(nums, seen, strict=True) if r is None))
        looked = dict(zip(missing, find(missing), strict=True))
        return [looked[n] if r is None else r for n, r in zip(nums, seen, strict=True)]

    def learn_found(self, nums: Sequence[int], found: Sequence[int]) -> None:
        """Keep what a lookup of the union-find said: each id's root, and that each root is one."""
        self.learn([*zip(nums, found, strict=True), *((r, r) for r in found)])

    def learn(self, pairs: Iterable[tuple[int, int]]) -> None:
        """Keep each (id, root it has now): (r, r) says r is a root; a pair whose root is younger than its id
        (not a root it can have) is left out."""
        with self._lock:
            self._learn(pairs)

    def _learn(self, pairs: Iterable[tuple[int, int]]) -> None:
        self._expire()
        root = self._root
        for num, r in pairs:
            if r <= num:
                root[num] = r
        if len(root) > self.max_entries:
            self._clear()

    def learn_unions(self, unions: Iterable[tuple[int, int, Sequence[int], int, Sequence[int]]]) -> None:
        """Keep what unions did, in order (unionfind.UNION_ROOTS, one group each): the document, the root it
        had, its matches, its root after the group, and the root each match had. All of them have the root
        after now (it is the smallest: unions are by smaller id). A match that was its own root and is not the
        root after merged into it, or was deleted meanwhile and joined nothing (the script says the same of
        both): it is not known any more."""
        with self._lock:
            self._learn_unions(unions)

    def _learn_unions(self, unions: Iterable[tuple[int, int, Sequence[int], int, Sequence[int]]]) -> None:
        self._expire()
        known = self._root
        for num, was, matches, root, before in unions:
            known[num] = known[was] = known[root] = root
            for m, b in zip(matches, before, strict=True):
                if b != m:
                    known[m] = known[b] = root
                elif m != root:
                    known.pop(m, None)
        if len(known) > self.max_entries:
            self._clear()

    def created(self, nums: Sequence[int]) -> None:
        """Documents just created with new integer ids by this process: each is its own root. Ids are given
        out in increasing order; one not above the last ones created here means the server gave them out
        again (it restarted without its data, or lost its last writes): everything known is forgotten first."""
        if not nums:
            return
        with self._lock:
            if min(nums) <= self._last_created:
                self._clear()
            self._last_created = max(nums)
            self._learn((n, n) for n in nums)

    def forget(self, nums: Iterable[int]) -> None:
        """Not know these ids any more (nor, through them, the ids whose chains pass them)."""
        with self._lock:
            for n in nums:
                self._root.pop(n, None)

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._clear()

    def _clear(self) -> None:
        self._root.clear()
        self._since = self._clock()

    def expire(self) -> None:
        """Forget everything when it was learned ``max_age_s`` ago or more."""
        with self._lock:
            self._expire()

    def _expire(self) -> None:
        if self._clock() - self._since >= self.max_age_s:
            self._clear()
