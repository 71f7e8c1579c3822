"""``dedupd rebuild``: build a new generation of the index beside the serving one, then switch atomically.

Every record and bucket key carries the index generation. A rebuild:

1. writes ``next_spec`` and ``next_gen`` into the index's meta hash (or resumes the rebuild already
   recorded there with the same target);
2. waits until every live daemon says, in its heartbeat, that it writes each new document into both
   generations (from then on nothing can reach only the old one);
3. fills the new generation: from the stored signatures when only the banding changes (bands, rows,
   capacity), else by replaying the source texts — the input stream's retained history or a JSONL file —
   through the same processing the daemon does (records are compare-and-set by input entry id, so a
   replayed entry never overwrites a newer version a daemon wrote meanwhile);
4. checks that the new generation holds every document of the current one (or ``--allow-missing``);
5. switches: one HSET of the meta hash makes the new generation current (daemons follow it at their
   next batch);
6. waits until the daemons have followed, then deletes the old generation's keys.

Interrupted anywhere, the index is never half-switched: before step 5 the old generation serves and a
rerun resumes (or ``--abort`` deletes the new generation); after it, the new one serves and a rerun
finishes deleting the old one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dedupd.errors import DedupdError
from dedupd.index import DocWrite, Index
from dedupd.keys import Keys
from dedupd.monitor import live_consumers
from dedupd.processor import Processor, RawEntry
from dedupd.record import decode_records
from dedupd.settings import Settings
from dedupd.spec import IndexSpec

Progress = Callable[[str, int, int | None], None]  # (phase, done, total)
_BATCH = 500


class RebuildError(DedupdError):
    """A rebuild cannot go on; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class State:
    """The generations recorded in the meta hash."""

    spec: IndexSpec
    gen: int
    next_spec: IndexSpec | None
    next_gen: int | None


def read_state(client: Any, keys: Keys) -> State | None:
    """The index's generations, or None when there is no index yet."""
    spec, gen, next_spec, next_gen = client.hmget(keys.meta, ["spec", "gen", "next_spec", "next_gen"])
    if spec is None:
        return None
    return State(IndexSpec.from_json(spec), int(gen or 0),
                 IndexSpec.from_json(next_spec) if next_spec else None,
                 int(next_gen) if next_gen is not None else None)


def rebands_only(a: IndexSpec, b: IndexSpec) -> bool:
    """True when the signatures stay valid (only the banding or the bucket sizing changes)."""
    return (a.shingle, a.num_perm, a.seed, a.minhash, a.scheme) == (b.shingle, b.num_perm, b.seed, b.minhash,
                                                                    b.scheme)


class Rebuilder:
    """Runs one rebuild (see the module docstring)."""

    def __init__(self, client: Any, settings: Settings, target: IndexSpec, progress: Progress,
                 wait_s: float = 60.0) -> None:
        self.client = client
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.target = target
        self.progress = progress
        self.wait_s = wait_s

    # ----- steps -----
    def begin(self) -> State:
        """Record the target as the next generation (or resume the same one); returns the state."""
        state = read_state(self.client, self.keys)
        if state is None:
            raise RebuildError(f"there is no index under prefix {self.keys.prefix!r} yet: nothing to rebuild "
                               "(start `dedupd serve` with the new settings instead)")
        if state.next_spec is not None:
            if state.next_spec != self.target:
                raise RebuildError("another rebuild is in progress, towards "
                                   f"{state.next_spec.to_json()}; finish it with the same settings, or run "
                                   "`dedupd rebuild --abort` first")
            return state
        if state.spec == self.target:
            left = self.drop_other_generations(state.gen)
            raise RebuildError("the index already has these parameters: nothing to rebuild"
                               + (f" (deleted {left} keys left over by an earlier rebuild)" if left else ""))
        nxt = state.gen + 1
        self.client.hset(self.keys.meta, mapping={"next_spec": self.target.to_json(), "next_gen": nxt})
        return State(state.spec, state.gen, self.target, nxt)

    def wait_for_daemons(self, key: str, value: int) -> None:
        """Wait until every live daemon's heartbeat reports ``key == value``."""
        deadline = time.monotonic() + self.wait_s
        while True:
            live = live_consumers(self.client, self.keys)
            behind = sorted(name for name, beat in live.items() if beat.get(key) != value)
            if not behind:
                return
            if time.monotonic() > deadline:
                raise RebuildError(f"daemons {', '.join(behind)} did not report {key}={value} within "
                                   f"{self.wait_s:.0f}s (are they older versions of dedupd?); nothing was "
                                   "switched: rerun `dedupd rebuild` to resume")
            self.progress(f"waiting for {len(behind)} daemon(s)", 0, None)
            time.sleep(0.2)

    def fill_from_signatures(self, state: State) -> int:
        """New buckets from the stored raw signatures (the records are copied as they are)."""
        assert state.next_gen is not None and state.next_spec is not None
        old = Index(self.client, self.keys, state.spec, state.gen, store_shingles=True)
        new = Index(self.client, self.keys, state.next_spec, state.next_gen, store_shingles=True, shadow=True)
        done = 0
        total = self.count_docs(state.gen)
        for nums in self._doc_nums(state.gen):
            blobs = self._get(old, nums)
            records = decode_records(nums, blobs, new.fingerprinter)
            present = [(n, b, records[n]) for n, b in zip(nums, blobs, strict=True) if b and records[n] is not None]
            fps = [rec.fingerprint for _, _, rec in present if not rec.fingerprint.empty]
            bands = iter(new.fingerprinter.band_hashes(fps)) if fps else iter(())
            writes = []
            for n, blob, rec in present:
                w = DocWrite(n, expected="", record=blob)  # only where no daemon wrote a newer version
                if rec is not None and not rec.fingerprint.empty:
                    w.add = next(bands)
                writes.append(w)
            new.apply(writes)
            done += len(nums)
            self.progress("re-banding", done, total)
        return done

    def fill_from_texts(self, state: State, source: Iterator[RawEntry], total: int | None) -> int:
        """Replay source entries into the new generation through the daemon's own processing."""
        assert state.next_gen is not None and state.next_spec is not None
        new = Index(self.client, self.keys, state.next_spec, state.next_gen,
                    store_shingles=self.settings.verify == "exact", shadow=True)
        shadow = Processor(self.client, self.settings, new, shadow=True)
        done = 0
        batch: list[RawEntry] = []
        for raw in source:
            batch.append(raw)
            if len(batch) >= _BATCH:
                shadow.process(batch)
                done += len(batch)
                batch = []
                self.progress("re-indexing texts", done, total)
        if batch:
            shadow.process(batch)
            done += len(batch)
            self.progress("re-indexing texts", done, total)
        return done

    def check_complete(self, state: State, allow_missing: bool, settle_s: float = 5.0) -> tuple[int, int]:
        """Documents in the new and in the current generation; raise if the new one lacks some.

        A document a daemon is writing right now may be in the current generation a moment before it is in
        the new one, so missing documents are looked for again for up to ``settle_s`` seconds.
        """
        assert state.next_gen is not None
        deadline = time.monotonic() + settle_s
        while True:
            current = set(self._nums(state.gen))
            missing = current - set(self._nums(state.next_gen))
            if not missing or allow_missing or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        have = len(current) - len(missing)
        if missing and not allow_missing:
            raise RebuildError(f"the new index lacks {len(missing)} of the {len(current)} documents of the current "
                               "one: the source does not hold them (the input stream keeps only its retained "
                               "history). Pass --from FILE.jsonl with every document, or --allow-missing to drop "
                               "them; nothing was switched")
        return have, len(current)

    def switch(self, state: State) -> None:
        """Make the new generation current: one atomic change of the meta hash."""
        assert state.next_spec is not None and state.next_gen is not None
        pipe = self.client.pipeline(transaction=True)
        pipe.hset(self.keys.meta, mapping={"spec": state.next_spec.to_json(), "gen": state.next_gen})
        pipe.hdel(self.keys.meta, "next_spec", "next_gen")
        pipe.execute()

    def drop_generation(self, gen: int) -> int:
        """Delete every record and bucket key of one generation; returns how many keys."""
        dropped = 0
        for pattern in (self.keys.doc_pattern_of(gen), self.keys.band_pattern(gen)):
            batch: list[bytes] = []
            for key in self.client.scan_iter(match=pattern, count=2000):
                batch.append(key)
                if len(batch) >= 2000:
                    dropped += self.client.unlink(*batch)
                    batch = []
                    self.progress(f"deleting generation {gen}", dropped, None)
            if batch:
                dropped += self.client.unlink(*batch)
        self.progress(f"deleting generation {gen}", dropped, dropped)
        return dropped

    def drop_other_generations(self, keep: int) -> int:
        """Delete record and bucket keys of any generation but ``keep`` (left by an interrupted rebuild)."""
        gens: set[int] = set()
        for pattern, at in ((self.keys.doc_pattern, 2), (self.keys.band_pattern_all, 2)):
            for key in self.client.scan_iter(match=pattern, count=5000):
                gen = int(key.decode().split(":")[at])
                if gen != keep:
                    gens.add(gen)
        return sum(self.drop_generation(g) for g in sorted(gens))

    def abort(self) -> int:
        """Forget an unfinished rebuild and delete its keys."""
        state = read_state(self.client, self.keys)
        if state is None or state.next_gen is None:
            raise RebuildError("no rebuild is in progress")
        self.client.hdel(self.keys.meta, "next_spec", "next_gen")
        return self.drop_generation(state.next_gen)

    # ----- helpers -----
    def count_docs(self, gen: int) -> int:
        return sum(1 for _ in self._nums(gen))

    def _nums(self, gen: int) -> Iterator[int]:
        prefix = len(self.keys.doc(0, gen)) - 1
        for key in self.client.scan_iter(match=self.keys.doc_pattern_of(gen), count=2000):
            yield int(key[prefix:])

    def _doc_nums(self, gen: int) -> Iterator[list[int]]:
        nums: list[int] = []
        for n in self._nums(gen):
            nums.append(n)
            if len(nums) >= _BATCH:
                yield nums
                nums = []
        if nums:
            yield nums

    def _get(self, index: Index, nums: list[int]) -> list[bytes | None]:
        pipe = self.client.pipeline(transaction=False)
        for n in nums:
            pipe.get(self.keys.doc(n, index.generation))
        return list(pipe.execute())


def stream_source(client: Any, keys: Keys) -> tuple[Iterator[RawEntry], int]:
    """The input stream's retained entries, oldest first, and how many there are."""
    total = int(client.xlen(keys.docs))

    def entries() -> Iterator[RawEntry]:
        cursor = "-"
        while True:
            page = client.xrange(keys.docs, min=cursor, count=_BATCH)
            if not page:
                return
            for entry_id, fields in page:
                yield entry_id.decode(), dict(fields)
            cursor = "(" + page[-1][0].decode()

    return entries(), total


def file_source(path: Path) -> tuple[Iterator[RawEntry], int]:
    """A JSONL file of stream fields; line n gets the entry id ``0-n`` (older than any stream entry, so a
    document a daemon changes during the rebuild keeps its newer version)."""
    from dedupd.producer import BadLine, parse_lines

    with path.open(encoding="utf-8") as f:
        total = sum(1 for line in f if line.strip())

    def entries() -> Iterator[RawEntry]:
        with path.open(encoding="utf-8") as f:
            for n, item in enumerate(parse_lines(f, "jsonl", f"{path.name}:"), start=1):
                if isinstance(item, BadLine):
                    raise RebuildError(f"{path}:{item.line_no}: {item.reason}")
                yield f"0-{n}", {k.encode(): v.encode() for k, v in item.items()}

    return entries(), total


def describe(state: State) -> str:
    """One line on what the rebuild changes."""
    assert state.next_spec is not None
    a, b = json.loads(state.spec.to_json()), json.loads(state.next_spec.to_json())
    changes = ", ".join(f"{k} {a[k]} -> {b[k]}" for k in sorted(a) if a[k] != b.get(k))
    return f"generation {state.gen} -> {state.next_gen}: {changes}"
