"""Index generations as one object: the meta hash, the rebuild lease and the pause, read and changed only here.

Every record and bucket key carries the index generation. The serving generation's spec and number are
in the meta hash; a rebuild records the generation it builds there too (``next_*``) and holds a lease (a
key with its token that expires unless renewed). Begin, pause, switch and abort are compare-and-set
scripts on that token (lua.REBUILD_*): a second rebuild refuses while the first one's lease lives, an
aborted rebuild can neither pause the daemons nor switch, and the switch happens only while the daemons
are paused. Daemons poll :meth:`Generations.poll` a few times a second.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace

from dedupd.errors import DedupdError
from dedupd.index import argv, lua
from dedupd.index.keys import Heartbeat, Keys, Meta
from dedupd.server.connection import RedisClient
from dedupd.similarity.spec import IndexSpec


class RebuildError(DedupdError):
    """A rebuild cannot go on; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class State:
    """The generations recorded in the meta hash."""

    spec: IndexSpec
    gen: int
    next_spec: IndexSpec | None = None
    next_gen: int | None = None
    next_mode: str | None = None  # "signatures", "stream" or "file"
    next_cut: str | None = None  # the input stream's last id when the rebuild began


@dataclass(frozen=True, slots=True)
class OwedAlerts:
    """The alerts a rebuild that lowered the threshold owes the pairs of documents indexed before its switch
    (``dedupd rebuild --alert-existing``: ops/existing_pairs.py), recorded just before the switch, with how far
    they are paid, and cleared once written."""

    gen: int  # the generation the rebuild built (they are owed only once it serves)
    old_threshold: float  # pairs at or above it were verified, and alerted, before
    cut: (
        str  # the last input entry the daemons had been given at the switch: later ones met the new threshold
    )
    # the entries the daemons' group held pending at the switch (delivered, not acknowledged: a consumer that
    # died, or one that waits for an older entry); a daemon verifies them again at the new threshold
    pending: tuple[str, ...] = ()
    done: int = 0  # the documents up to this integer id are paid (they are paid in integer id order)

    def to_json(self) -> str:
        return json.dumps(
            {
                "gen": self.gen,
                "old_threshold": self.old_threshold,
                "cut": self.cut,
                "pending": list(self.pending),
                "done": self.done,
            }
        )

    @classmethod
    def from_json(cls, raw: str | bytes) -> OwedAlerts:
        data = json.loads(raw)
        pending = tuple(str(p) for p in data.get("pending", ()))
        return cls(
            int(data["gen"]),
            float(data["old_threshold"]),
            str(data["cut"]),
            pending,
            int(data.get("done", 0)),
        )


@dataclass(frozen=True, slots=True)
class Poll:
    """What a daemon needs to know each moment: the serving generation, and whether a switch pauses it."""

    spec: IndexSpec | None
    gen: int
    paused_for: int | None
    rebuilding: bool = False  # a rebuild holds its lease (the retention window's expiry waits for it)


def _s(raw: bytes | str | None) -> str | None:
    return raw.decode() if isinstance(raw, bytes) else raw


class Generations:
    """The meta hash of one prefix."""

    def __init__(self, client: RedisClient, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        reg = client.register_script
        self._begin, self._renew, self._pause = (
            reg(lua.REBUILD_BEGIN),
            reg(lua.REBUILD_RENEW),
            reg(lua.REBUILD_PAUSE),
        )
        self._switch, self._abort = reg(lua.REBUILD_SWITCH), reg(lua.REBUILD_ABORT)
        self._owed = reg(lua.OWED_ALERTS)

    @property
    def _keys(self) -> list[str]:
        return [self.keys.meta, self.keys.rebuild_lease, self.keys.pause]

    def read(self) -> State | None:
        """The index's generations, or None when there is no index yet."""
        fields = [Meta.SPEC, Meta.GEN, Meta.NEXT_SPEC, Meta.NEXT_GEN, Meta.NEXT_MODE, Meta.NEXT_CUT]
        spec, gen, next_spec, next_gen, mode, cut = self.client.hmget(self.keys.meta, fields)
        if spec is None:
            return None
        return State(
            IndexSpec.from_json(spec),
            int(gen or 0),
            IndexSpec.from_json(next_spec) if next_spec else None,
            int(next_gen) if next_gen is not None else None,
            _s(mode),
            _s(cut),
        )

    def poll(self) -> Poll:
        """The serving spec and generation, and the generation a switch pauses the daemons for (one exchange)."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.meta, [Meta.SPEC, Meta.GEN])
        pipe.get(self.keys.pause)
        pipe.exists(self.keys.rebuild_lease)
        (spec, gen), pause, rebuilding = pipe.execute()
        return Poll(
            IndexSpec.from_json(spec) if spec else None,
            int(gen or 0),
            int(pause) if pause else None,
            bool(rebuilding),
        )

    def lease_owner(self) -> str | None:
        """The token of the rebuild holding the lease (``host:pid:random``), if any."""
        return _s(self.client.get(self.keys.rebuild_lease))

    # ----- the rebuild protocol (compare-and-set on the lease token) -----
    def begin(self, target: IndexSpec, mode: str, cut: str, token: str, lease_ms: int) -> tuple[State, bool]:
        """Record ``target`` as the next generation, or resume the unfinished rebuild towards it.

        Returns:
            The state and whether this resumes an earlier rebuild.

        Raises:
            RebuildError: no index yet, nothing to change, another rebuild running, or an unfinished one
                towards another target.
        """
        outcome, detail = (
            _s(x) or ""
            for x in self._begin(
                keys=self._keys[:2], args=argv.rebuild_begin(token, lease_ms, target.to_json(), mode, cut)
            )
        )
        p = self.keys.prefix
        if outcome == "none":
            raise RebuildError(
                f"there is no index under prefix {p!r} yet: nothing to rebuild (start `dedupd serve` "
                "with the new settings instead)"
            )
        if outcome == "running":
            raise RebuildError(
                f"another rebuild is running (process {detail}); wait for it, or stop it with "
                "`dedupd rebuild --abort`"
            )
        if outcome == "other":
            raise RebuildError(
                f"an unfinished rebuild towards other parameters ({_summary(detail)}) is recorded; "
                "resume it with the same settings, or run `dedupd rebuild --abort` first"
            )
        if outcome == "same":
            raise RebuildError("the index already has these parameters: nothing to rebuild")
        state = self.read()
        assert state is not None
        return state, outcome == "resumed"

    def renew(self, token: str, lease_ms: int) -> None:
        """Renew the lease.

        Raises:
            RebuildError: when the rebuild was aborted (or taken over after its lease expired).
        """
        if not self._renew(keys=self._keys[:2], args=argv.rebuild_renew(token, lease_ms)):
            raise RebuildError(
                "the rebuild was aborted (`dedupd rebuild --abort`) or its lease expired and "
                "another rebuild took over; nothing was switched"
            )

    def pause(self, token: str, pause_ms: int, gen: int) -> None:
        """Ask the daemons to finish their batch and wait (for at most ``pause_ms``).

        Raises:
            RebuildError: when the rebuild was aborted.
        """
        if not self._pause(keys=self._keys, args=argv.rebuild_pause(token, pause_ms, gen)):
            raise RebuildError("the rebuild was aborted (`dedupd rebuild --abort`); nothing was switched")

    def switch(self, token: str) -> bool:
        """Make the next generation current and lift the pause. False when the pause expired first.

        Raises:
            RebuildError: when the rebuild was aborted.
        """
        done = int(self._switch(keys=self._keys, args=argv.rebuild_switch(token)))
        if done == 0:
            raise RebuildError("the rebuild was aborted (`dedupd rebuild --abort`); nothing was switched")
        return done == 1

    def abort(self) -> int | None:
        """Forget the unfinished rebuild (its runner stops at its next step) and lift any pause; returns the
        generation it was building, or None when there was none."""
        gen = self._abort(keys=self._keys, args=[])
        return int(gen) if gen else None

    def release(self, token: str) -> None:
        """Give the lease up (a finished or failed rebuild)."""
        if self.lease_owner() == token:
            self.client.delete(self.keys.rebuild_lease)

    # ----- alerts owed by a rebuild that lowered the threshold -----
    def owe_alerts(self, owed: OwedAlerts) -> None:
        """Record the alerts a rebuild will owe once it has switched (just before the switch)."""
        self.client.hset(self.keys.meta, Meta.OWED_ALERTS, owed.to_json())

    def owed_alerts(self) -> OwedAlerts | None:
        """The alerts owed for the serving generation, if any (a record left for another generation, by a
        rebuild that never switched or one run after, is dropped)."""
        raw, gen = self.client.hmget(self.keys.meta, [Meta.OWED_ALERTS, Meta.GEN])
        if raw is None:
            return None
        owed = OwedAlerts.from_json(raw)
        if owed.gen != int(gen or 0):
            self.client.hdel(self.keys.meta, Meta.OWED_ALERTS)
            return None
        return owed

    def paid_up_to(self, owed: OwedAlerts, num: int) -> OwedAlerts | None:
        """Record that the owed alerts of the documents up to integer id ``num`` are written; None when
        another rebuild has switched meanwhile (the record is no longer this debt's: nothing is changed)."""
        paid = replace(owed, done=num)
        return paid if self._owed(keys=[self.keys.meta], args=[owed.gen, paid.to_json()]) else None

    def settle_alerts(self, owed: OwedAlerts) -> None:
        """The owed alerts are written (a record another rebuild left since is kept)."""
        self._owed(keys=[self.keys.meta], args=[owed.gen, ""])

    # ----- daemons -----
    def heartbeats(self, max_age: float | None = None) -> dict[str, Heartbeat]:
        """The daemons whose heartbeat key exists (and is at most ``max_age`` seconds old)."""
        out: dict[str, Heartbeat] = {}
        prefix = len(self.keys.heartbeat(""))
        for key, beat in self._beats():
            if max_age is None or time.time() - beat.time <= max_age:
                out[key[prefix:]] = beat
        return out

    def _beats(self) -> Iterator[tuple[str, Heartbeat]]:
        for key in self.client.scan_iter(match=self.keys.heartbeat_pattern, count=500):
            raw = self.client.get(key)
            if raw is not None:
                yield (key.decode() if isinstance(key, bytes) else key), Heartbeat.from_json(raw)


def _summary(spec_json: str) -> str:
    try:
        spec = json.loads(spec_json)
        return ", ".join(
            f"{k} {spec[k]}" for k in ("shingle", "num_perm", "bands", "rows", "threshold") if k in spec
        )
    except ValueError:
        return spec_json
