"""``dedupd rebuild``: build a new generation of the index beside the serving one, then switch atomically.

Every record and bucket key carries the index generation. A rebuild (:meth:`Rebuild.run`):

1. begins: records the target spec as the next generation with a lease (or resumes the unfinished rebuild
   towards the same target whose lease expired); a second rebuild refuses while the lease lives, and so
   does a server that may evict keys (dedupd/server/eviction.py);
2. opens a consumer group of its own on the input stream (``keys.REBUILD_GROUP``): from the start of the
   stream when it replays the stream's texts, else from the stream's end when it began. Through it the
   rebuild replays, in stream order, every entry that reaches the stream while it runs, and the trimming
   of the stream keeps what it has not replayed yet;
3. fills the new generation: by copying the records and re-banding their stored signatures when only the
   banding changes (bands, rows, threshold, capacity), else (shingling, MinHash, verification or the text
   normalisation's version change) from the texts of ``--from FILE`` (line n is entry ``0-n``, older than
   any stream entry) or of the stream itself; then catches up with the stream;
4. pauses the daemons (they finish their batch and wait; the pause expires by itself if the rebuild dies),
   catches up to the last entry delivered to them, and checks that the new generation holds every
   document of the current one at least at the same version (the stream id of the entry that last changed
   it; with ``--from FILE``, a document unchanged since the rebuild began may have its file version);
5. switches (compare-and-set: only this rebuild, only while the daemons are paused) and lifts the pause;
6. waits until the daemons follow, then deletes the old generation's keys and its replay group.

With ``alert_existing`` (a rebuild that lowers the threshold and only re-bands), step 4 also records, just
before the switch, the alerts the new generation owes the documents indexed before it (generations.OwedAlerts:
the old threshold, the last entry the daemons had been given and those they held pending);
ops/existing_pairs.py writes them after.

The daemons write only the serving generation; the rebuild alone writes the new one, in stream order, so
per-document order holds in it as in the serving one. Interrupted anywhere, the index is never half
switched: before step 5 the old generation serves and a rerun resumes (or ``--abort`` deletes the new
generation and makes a running rebuild stop); after it, the new one serves and a rerun has nothing to do.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import redis

from dedupd.daemon.batch import RawEntry
from dedupd.daemon.processor import Processor
from dedupd.daemon.stream import as_text, ensure_group
from dedupd.index.buckets import DocWrite, Hits, placements
from dedupd.index.docstate import sid
from dedupd.index.gateway import RedisGateway
from dedupd.index.generations import Generations, OwedAlerts, RebuildError, State
from dedupd.index.keys import GROUP, REBUILD_GROUP, Keys
from dedupd.index.record import decode_records
from dedupd.server.connection import RedisClient
from dedupd.server.eviction import refuse_eviction
from dedupd.settings import Settings
from dedupd.similarity.spec import IndexSpec

__all__ = ["Rebuild", "RebuildError", "Report", "file_source", "rebands_only"]

Progress = Callable[[str, int, int | None], None]  # (phase, done, total)
_BATCH = 500
LEASE_MS = 15_000
PAUSE_MS = 30_000


def rebands_only(a: IndexSpec, b: IndexSpec) -> bool:
    """True when the stored signatures stay valid (only the banding, threshold or bucket sizing changes);
    another text normalisation changes the shingles: the texts are reshingled."""
    same = ("shingle", "num_perm", "seed", "minhash", "scheme", "normalization")
    return all(getattr(a, f) == getattr(b, f) for f in same) and (
        a.verify == b.verify or b.verify == "signature"
    )


@dataclass(frozen=True, slots=True)
class Report:
    """What a finished rebuild did."""

    state: State
    processed: int
    documents: int
    before: int
    seconds: float
    dropped: int


class Rebuild:
    """One rebuild of one prefix (see the module docstring)."""

    def __init__(
        self,
        client: RedisClient,
        settings: Settings,
        target: IndexSpec,
        progress: Progress,
        source: Path | None = None,
        allow_missing: bool = False,
        wait_s: float = 60.0,
        alert_existing: bool = False,
    ) -> None:
        self.client = client
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.generations = Generations(client, self.keys)
        self.target = target
        self.progress = progress
        self.source = source
        self.allow_missing = allow_missing
        self.wait_s = wait_s
        self.alert_existing = alert_existing  # owe the alerts of the pairs a lower threshold makes (see run)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._pausing: int | None = None  # the generation the daemons are paused for, while they are
        self._released = False  # the lease was given up (after the switch)

    # ----- the whole sequence -----
    def begin(self) -> tuple[State, bool]:
        """Step 1: record the target (or resume). Returns the state and whether it resumes.

        Raises:
            ConfigError: when the server may evict keys (maxmemory-policy other than noeviction): the new
                generation would lose documents in silence.
        """
        refuse_eviction(self.client)
        current = self.generations.read()
        mode = (
            "file"
            if self.source is not None
            else (
                "signatures" if current is not None and rebands_only(current.spec, self.target) else "stream"
            )
        )
        try:
            state, resumed = self.generations.begin(
                self.target, mode, self._replay_start(), self.token, LEASE_MS
            )
        except RebuildError as exc:
            if "nothing to rebuild" in str(exc) and current is not None:  # leftovers of a rebuild cut short
                self._destroy_group()
                self.drop_other_generations(current.gen)
            raise
        if not resumed:  # a group left by an earlier, aborted or cut short rebuild would start elsewhere
            self._destroy_group()
        if resumed and state.next_mode != mode:
            self.generations.release(self.token)
            how = {"file": "with --from FILE", "stream": "without --from", "signatures": "without --from"}
            raise RebuildError(
                f"the unfinished rebuild was started {how.get(state.next_mode or '', '')} "
                f"({state.next_mode}); resume it the same way, or run `dedupd rebuild --abort`"
            )
        return state, resumed

    def run(self, state: State) -> Report:
        """Steps 2-6 for a begun rebuild; the lease is given up whatever happens."""
        started = time.monotonic()
        try:
            start = "0" if state.next_mode == "stream" else (state.next_cut or "0")
            ensure_group(self.client, self.keys, REBUILD_GROUP, start)
            done = self.fill(state)
            while (
                caught := self.catch_up(state, until=None)
            ) >= _BATCH:  # until little is left for the pause
                done += caught
            done += caught
            have, before = self.pause_and_switch(state)
        except BaseException:
            self.generations.release(self.token)
            raise
        finally:
            self._pausing = None
        self.generations.release(self.token)
        self._released = True
        self._destroy_group()  # switched: its replay position no longer matters (and it would hold trimming)
        assert state.next_gen is not None
        self.wait_for_daemons(lambda beat: beat.gen == state.next_gen, "follow the new generation")
        dropped = self.drop_generation(state.gen)
        return Report(state, done, have, before, time.monotonic() - started, dropped)

    def abort(self) -> int:
        """Forget an unfinished rebuild (a running one stops at its next step) and delete its keys."""
        gen = self.generations.abort()
        if gen is None:
            raise RebuildError("no rebuild is in progress")
        self._destroy_group()
        return self.drop_generation(gen)

    # ----- step 3: fill -----
    def fill(self, state: State) -> int:
        if state.next_mode == "signatures":
            return self.fill_from_signatures(state)
        if state.next_mode == "file":
            assert self.source is not None
            entries, total = file_source(self.source)
            return self._replay(state, entries, total, f"re-indexing {self.source.name}")
        return 0  # the stream is replayed by the catch-up

    def fill_from_signatures(self, state: State) -> int:
        """New buckets from the stored raw signatures (the records are copied as they are, where the new
        generation has none yet)."""
        old, new = (
            self._gateway(state.spec, state.gen),
            self._gateway(self._next(state), self._next_gen(state)),
        )
        done, total = 0, self.count_docs(state.gen)
        now_ms = int(time.time() * 1000)
        for nums in self._doc_nums(state.gen):
            pipe = self.client.pipeline(transaction=False)
            for n in nums:
                pipe.get(old.record_key(n))
            blobs = pipe.execute()
            records = decode_records(nums, blobs, new.fingerprinter)
            present = [
                (n, b, rec) for n, b in zip(nums, blobs, strict=True) if b and (rec := records[n]) is not None
            ]
            fps = [rec.fingerprint for _, _, rec in present if not rec.fingerprint.empty]
            bands = iter(new.fingerprinter.band_hashes(fps)) if fps else iter(())
            writes = []
            for n, blob, rec in present:
                w = DocWrite(n, expected="", record=blob)  # only where the catch-up wrote no newer version
                if not rec.fingerprint.empty:
                    w.add = next(bands)
                writes.append(w)
            _, hits = new.apply(new.prepare(writes))
            self._displace(new, writes, hits)
            if new.spec.windowed and present:  # a window turned on: the documents' age starts now
                touched: dict[str, float] = {str(n): now_ms for n, _, _ in present}
                self.client.zadd(self.keys.touched, touched, nx=True)
            done += len(nums)
            self.generations.renew(self.token, LEASE_MS)
            self.progress("re-banding", done, total)
        return done

    # ----- steps 3-4: replay the stream through the rebuild's group -----
    def catch_up(self, state: State, until: str | None) -> int:
        """Replay the stream from the group's position up to ``until`` (None: its current end)."""
        position = self._group_position()
        end = until or self._stream_end()
        done, total = 0, self._count_between(position, end)

        def entries() -> Iterator[RawEntry]:
            cursor = position
            while True:
                page: Any = self.client.xrange(self.keys.docs, min=f"({cursor}", max=end, count=_BATCH)
                if not page:
                    return
                for entry_id, fields in page:
                    yield as_text(entry_id), dict(fields)
                cursor = as_text(page[-1][0])

        def replayed(last: str) -> None:  # the group's position moves only once its entries are written
            self.client.xgroup_setid(self.keys.docs, REBUILD_GROUP, last)

        if sid(end) > sid(position):
            done = self._replay(state, entries(), total, "replaying the input stream", replayed)
        return done

    def _replay(
        self,
        state: State,
        source: Iterator[RawEntry],
        total: int | None,
        phase: str,
        replayed: Callable[[str], None] | None = None,
    ) -> int:
        """Process entries into the next generation in order, as the daemons would (no outputs); after each
        batch, ``replayed`` gets its last entry id."""
        shadow = Processor(self._gateway(self._next(state), self._next_gen(state)), self.settings)
        done = 0
        batch: list[RawEntry] = []
        for raw in source:
            batch.append(raw)
            if len(batch) >= _BATCH:
                done += self._replay_batch(shadow, batch, total, phase, done, replayed)
                batch = []
        if batch:
            done += self._replay_batch(shadow, batch, total, phase, done, replayed)
        return done

    def _replay_batch(
        self,
        shadow: Processor,
        batch: list[RawEntry],
        total: int | None,
        phase: str,
        done: int,
        replayed: Callable[[str], None] | None,
    ) -> int:
        shadow.process(batch)
        if replayed is not None:
            replayed(batch[-1][0])
        self.keepalive()
        self.progress(phase, done + len(batch), total)
        return len(batch)

    def keepalive(self) -> None:
        """Renew the lease, and while the daemons are paused for the switch, the pause too (long steps)."""
        if self._released:
            return  # switched: nothing left to hold
        if self._pausing is None:
            self.generations.renew(self.token, LEASE_MS)
        else:
            self.generations.pause(self.token, PAUSE_MS, self._pausing)

    # ----- steps 4-5: pause, last catch-up, check, switch -----
    def pause_and_switch(self, state: State) -> tuple[int, int]:
        """Pause the daemons, replay what they were given, check, switch. Returns (documents, before)."""
        assert state.next_gen is not None
        while True:
            self.generations.pause(self.token, PAUSE_MS, state.next_gen)
            self._pausing = state.next_gen
            try:
                self.wait_for_daemons(lambda beat: beat.paused == state.next_gen, "pause")
                delivered = self._delivered()
                self.catch_up(state, until=delivered)
                have, before = self.check_complete(state)
                if (
                    self.alert_existing
                ):  # the daemons verify what comes after `delivered` at the new threshold
                    owed = OwedAlerts(state.next_gen, state.spec.threshold, delivered, self._pending())
                    self.generations.owe_alerts(owed)
            except BaseException:
                self._pausing = None
                self.generations.pause(self.token, 1, state.next_gen)  # lift the pause at once
                raise
            if self.generations.switch(self.token):
                return have, before
            self.progress("the pause expired before the switch: pausing again", 0, None)

    def check_complete(self, state: State) -> tuple[int, int]:
        """Every document of the current generation is in the new one at least at its version; returns
        (documents in the new generation, documents in the current one).

        Raises:
            RebuildError: naming how many lack or are older, unless ``allow_missing``.
        """
        old, new = (
            self._gateway(state.spec, state.gen),
            self._gateway(self._next(state), self._next_gen(state)),
        )
        lacking = checked = 0
        cut = sid(state.next_cut or "0-0")
        for nums in self._doc_nums(state.gen):
            before, after = old.versions(nums), new.versions(nums)
            for n in nums:
                if not before[n]:
                    continue
                checked += 1
                v_old, v_new = sid(before[n]), after[n]
                from_file = state.next_mode == "file" and v_new.startswith("0-") and v_old <= cut
                if not v_new or (sid(v_new) < v_old and not from_file):
                    lacking += 1
            self.progress("checking versions", checked, None)
        if lacking and not self.allow_missing:
            raise RebuildError(
                f"the new index lacks {lacking} of the {checked} documents of the current one, or has older "
                "versions of them: the source does not hold them (the input stream keeps only its retained "
                "history). Pass --from FILE.jsonl with every document, or --allow-missing to drop them; nothing "
                "was switched"
            )
        return checked - lacking, checked

    def wait_for_daemons(self, ready: Callable[..., bool], what: str) -> None:
        """Wait until every live daemon's heartbeat satisfies ``ready``."""
        deadline = time.monotonic() + self.wait_s
        while True:
            behind = sorted(name for name, beat in self.generations.heartbeats().items() if not ready(beat))
            if not behind:
                return
            if time.monotonic() > deadline:
                raise RebuildError(
                    f"daemons {', '.join(behind)} did not {what} within {self.wait_s:.0f}s (are "
                    "they older versions of dedupd?); rerun `dedupd rebuild` to resume"
                )
            self.progress(f"waiting for {len(behind)} daemon(s) to {what}", 0, None)
            self.keepalive()
            time.sleep(0.2)

    # ----- step 6 and helpers -----
    def drop_generation(self, gen: int) -> int:
        """Delete every record and bucket key of one generation (and the buckets a write on a Redis Cluster
        had still to leave: keys.leaving); returns how many keys."""
        dropped = 0
        patterns = (
            self.keys.doc_pattern_of(gen),
            self.keys.band_pattern(gen),
            self.keys.leaving_pattern_of(gen),
            self.keys.deficits(gen),
        )
        for pattern in patterns:
            batch: list[bytes] = []
            for key in self.client.scan_iter(match=pattern, count=2000):
                batch.append(key)
                if len(batch) >= 2000:
                    dropped += int(self.client.unlink(*batch))
                    batch = []
                    self.progress(f"deleting generation {gen}", dropped, None)
            if batch:
                dropped += int(self.client.unlink(*batch))
        self.progress(f"deleting generation {gen}", dropped, dropped)
        return dropped

    def drop_other_generations(self, keep: int) -> int:
        """Delete the record and bucket keys of every generation but ``keep`` (left by a rebuild cut short)."""
        gens: set[int] = set()
        patterns = (
            self.keys.doc_pattern,
            self.keys.band_pattern_all,
            self.keys.leaving_pattern_of("*"),
            self.keys.deficits("*"),
        )
        for pattern in patterns:
            for key in self.client.scan_iter(match=pattern, count=5000):
                gen = int(as_text(key).lstrip("{").split(":")[2])
                if gen != keep:
                    gens.add(gen)
        return sum(self.drop_generation(g) for g in sorted(gens))

    def count_docs(self, gen: int) -> int:
        return sum(len(nums) for nums in self._doc_nums(gen))

    def _doc_nums(self, gen: int) -> Iterator[list[int]]:
        prefix = len(self.keys.doc(0, gen)) - 1
        nums: list[int] = []
        for key in self.client.scan_iter(match=self.keys.doc_pattern_of(gen), count=2000):
            nums.append(int(key[prefix:]))
            if len(nums) >= _BATCH:
                yield nums
                nums = []
                self.keepalive()
        if nums:
            yield nums

    @staticmethod
    def _displace(new: RedisGateway, writes: list[DocWrite], hits: Hits) -> None:
        """Put the documents that full buckets kept out of most of their buckets in them (lua.DISPLACE), as the
        daemons do: a re-banded index leaves no document findable nowhere."""
        nums = np.array([w.num for w in writes], dtype=np.int64)
        buckets = np.array([np.count_nonzero(w.add) for w in writes], dtype=np.int64)
        pl = placements(hits, nums, buckets)
        if pl.key.size:
            exchange = new.exchange()
            new.displace(exchange, pl)
            exchange.execute()

    def _gateway(self, spec: IndexSpec, gen: int) -> RedisGateway:
        return RedisGateway(self.client, self.keys, spec, gen, serving=False, bounds=self.settings.bounds())

    @staticmethod
    def _next(state: State) -> IndexSpec:
        assert state.next_spec is not None
        return state.next_spec

    @staticmethod
    def _next_gen(state: State) -> int:
        assert state.next_gen is not None
        return state.next_gen

    def _stream_end(self) -> str:
        try:
            info = self.client.xinfo_stream(self.keys.docs)
        except redis.ResponseError:  # no stream yet
            return "0-0"
        return as_text(info["last-generated-id"])

    def _replay_start(self) -> str:
        """Where the replay of the input stream begins: just before the oldest entry the daemons' group has
        not acknowledged (pending, or not yet delivered). Everything before it is in the records a rebuild
        copies; everything after it is replayed (an entry applied already changes nothing again)."""
        try:
            groups = self.client.xinfo_groups(self.keys.docs)
        except redis.ResponseError:
            return "0-0"
        for g in groups:
            if as_text(g["name"]) != GROUP:
                continue
            if int(g["pending"]):
                oldest = self.client.xpending(self.keys.docs, GROUP)["min"]
                if oldest is not None:
                    ms, seq = sid(as_text(oldest))
                    return f"{ms}-{seq - 1}" if seq else f"{max(ms - 1, 0)}-{2**64 - 1 if ms else 0}"
            return as_text(g["last-delivered-id"])
        return "0-0"  # no daemon has read anything: replay it all

    def _delivered(self) -> str:
        """The last entry delivered to the daemons' group (everything after it is still to be read)."""
        try:
            groups = self.client.xinfo_groups(self.keys.docs)
        except redis.ResponseError:
            return "0-0"
        for g in groups:
            if as_text(g["name"]) == GROUP:
                return as_text(g["last-delivered-id"])
        return self._stream_end()

    def _pending(self) -> tuple[str, ...]:
        """The entries delivered to the daemons' group and not acknowledged (a dead consumer's, or entries
        that wait for an older one of their document): whoever takes them verifies them at the new threshold."""
        out: list[str] = []
        start = "-"
        while True:
            try:
                page = self.client.xpending_range(self.keys.docs, GROUP, min=start, max="+", count=1000)
            except redis.ResponseError:  # no daemons' group: nothing delivered
                return ()
            out += [as_text(p["message_id"]) for p in page]
            if len(page) < 1000:
                return tuple(out)
            start = f"({out[-1]}"

    def _group_position(self) -> str:
        for g in self.client.xinfo_groups(self.keys.docs):
            if as_text(g["name"]) == REBUILD_GROUP:
                return as_text(g["last-delivered-id"])
        raise RebuildError("the rebuild's replay group disappeared (was the input stream deleted?); rerun it")

    def _count_between(self, after: str, until: str) -> int | None:
        if sid(after) == (0, 0):
            return int(self.client.xlen(self.keys.docs))
        return None

    def _destroy_group(self) -> None:
        with contextlib.suppress(redis.ResponseError):  # no such group
            self.client.xgroup_destroy(self.keys.docs, REBUILD_GROUP)


def file_source(path: Path) -> tuple[Iterator[RawEntry], int]:
    """A JSONL file of stream fields; line n gets the entry id ``0-n`` (older than any stream entry, so a
    document changed during the rebuild keeps its newer version)."""
    from dedupd.ops.producer import BadLine, parse_lines

    with path.open(encoding="utf-8") as f:
        total = sum(1 for line in f if line.strip())

    def entries() -> Iterator[RawEntry]:
        with path.open(encoding="utf-8") as f:
            for n, item in enumerate(parse_lines(f, "jsonl", f"{path.name}:"), start=1):
                if isinstance(item, BadLine):
                    raise RebuildError(f"{path}:{item.line_no}: {item.reason}")
                yield f"0-{n}", {k.encode(): v.encode() for k, v in item.items()}

    return entries(), total
