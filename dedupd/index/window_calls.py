"""The retention window's calls of the Redis gateway (index/retention.py): the touch of the documents written
or named by an alert (scripts/touch.lua), and the steps of an expiry (scripts/expire_claim.lua,
expire_note.lua, expire_finish.lua), with the deficits of the documents that leave.

:class:`WindowCalls` is a base of gateway.RedisGateway, kept apart as one concept: it uses the gateway's
client, keys, spec, generation, union-find keys, known roots and the scripts the gateway registers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

from dedupd.index import argv
from dedupd.index.buckets import DocWrite
from dedupd.index.keys import Keys
from dedupd.index.known_roots import KnownRoots
from dedupd.index.protocol import Exchange
from dedupd.index.retention import Claim
from dedupd.server.connection import RedisClient, ScriptPipeline
from dedupd.similarity.spec import IndexSpec

__all__ = ["WindowCalls"]


class WindowCalls:
    """The retention window's calls of one index generation on Redis (a base of gateway.RedisGateway)."""

    client: RedisClient
    keys: Keys
    spec: IndexSpec
    generation: int
    serving: bool  # a rebuild's replay touches nothing
    cluster: bool  # on a Redis Cluster: no deficits (lua.DISPLACE keeps none there)
    _uf: list[str]  # the union-find's keys (unionfind.py)
    _known: KnownRoots
    _touch: Any  # the registered scripts: touch.lua, expire_claim.lua, expire_note.lua, expire_finish.lua
    _claim: Any
    _note: Any
    _finish: Any

    def _touch_written(self, pipe: ScriptPipeline, writes: Sequence[DocWrite]) -> int:
        """Queue scripts/touch.lua for the documents ``writes`` keep (not those they delete), before the writes
        (a document is never expired between its write and its touch): with a retention window an upsert or
        append touches its document when it is written, and only then (an entry refused, deferred or
        dead-lettered touches nothing); a rebuild's replay touches nothing. Returns the calls queued."""
        if not (self.serving and self.spec.windowed):
            return 0
        nums = [w.num for w in writes if not w.delete]
        if not nums:
            return 0
        k = self.keys
        args = argv.touch(argv.TOUCH_WRITTEN, nums)
        pipe.script(self._touch, [k.touched, k.expiring], args)
        return 1

    def touch(self, exchange: Exchange, nums: Sequence[int]) -> None:
        """Queue scripts/touch.lua: the documents a later document's alert named start their age again (only
        those with a touch time: one being expired or forgotten is not brought back)."""
        if nums:
            k = self.keys
            args = argv.touch(argv.TOUCH_NAMED, nums)
            cast(ScriptPipeline, exchange).script(self._touch, [k.touched, k.expiring], args)

    def claim_expiry(self, limit: int, lease_ms: int) -> Claim:
        """scripts/expire_claim.lua with this index's window."""
        k, spec = self.keys, self.spec
        args = argv.expire_claim(spec.retention_s, spec.max_documents, limit, lease_ms)
        return Claim.of(self._claim(keys=[k.touched, k.expiring, k.expiring_ids], args=args))

    def note_expiry(self, deadline: int, notes: Sequence[tuple[int, str]]) -> None:
        """scripts/expire_note.lua."""
        if notes:
            keys = [self.keys.expiring, self.keys.expiring_ids]
            self._note(keys=keys, args=argv.expire_note(deadline, notes))

    def finish_expiry(self, deadline: int, done: Sequence[tuple[int, str, str]]) -> int:
        """scripts/expire_finish.lua (it counts the documents expired); the expired documents' roots known to
        this process are forgotten."""
        if not done:
            return 0
        k = self.keys
        keys = [*self._uf, k.id_forward, k.uf_reps, k.touched, k.expiring, k.expiring_ids, k.expired_count]
        pipe = ScriptPipeline(self.client)
        pipe.script(self._finish, keys, argv.expire_finish(deadline, done))
        self._drop_deficits([num for num, _, _ in done], pipe)  # (in the same exchange)
        expired = int(pipe.execute()[0])
        self._known.forget(num for num, _, _ in done)
        return expired

    def _drop_deficits(self, nums: Sequence[int], pipe: ScriptPipeline | None = None) -> None:
        """Forget the deficits (lua.DISPLACE: single Redis only) of documents deleted or expired (queued in
        ``pipe`` when given)."""
        if not self.cluster and (nums := [n for n in nums if n]):
            fields = [n.to_bytes(4, "little") for n in nums]
            (self.client if pipe is None else pipe).hdel(self.keys.deficits(self.generation), *fields)
