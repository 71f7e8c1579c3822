"""The planner decides per-document order without Redis: a table of decisions, and a simulation of two
consumers with crashes, claims and redeliveries whose final state must equal stream order (hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dedupd.daemon.entries import Entry, Op
from dedupd.daemon.planner import Action, Step, decide, plan, unique_runs
from dedupd.index.docstate import DocState, sid
from dedupd.index.record import Record


def entry(n: int, op: Op = Op.UPSERT, text: str | None = "t", doc: str = "X") -> Entry:
    return Entry(f"{n}-0", op, doc, None if op is Op.DELETE else text, None, None, None)


def record(version: int) -> Record:
    return Record(1, "X", None, f"{version}-0")  # type: ignore[arg-type]  # decide reads only the version


def state(version: int | None = None, tomb: int | None = None, inflight: tuple[int, ...] = ()) -> DocState:
    return DocState(
        1,
        record(version) if version is not None else None,
        f"{tomb}-0" if tomb else None,
        tuple(f"{i}-0" for i in inflight),
    )


@pytest.mark.parametrize(
    ("e", "s", "want"),
    [
        (entry(5), state(), Action.APPLY),  # a new document
        (entry(5), state(version=3), Action.APPLY),  # a newer version
        (entry(5), state(version=5), Action.REJOIN),  # a redelivery of the applied entry
        (entry(5), state(version=7), Action.REJOIN),  # applied before a newer one (crash before the ack)
        (entry(5, Op.DELETE), state(version=7), Action.SKIP),  # a delete superseded by a newer upsert
        (entry(5), state(tomb=7), Action.SKIP),  # an upsert older than the delete that removed the doc
        (entry(9), state(tomb=7), Action.APPLY),  # re-created after its delete
        (
            entry(5, Op.APPEND),
            state(inflight=(3, 5)),
            Action.DEFER,
        ),  # the upsert before it is not applied yet
        (
            entry(5, Op.APPEND),
            state(version=3, inflight=(3, 5)),
            Action.APPLY,
        ),  # it was (crash before the ack)
        (entry(5, Op.DELETE), state(version=2, inflight=(4, 5, 8)), Action.DEFER),
        (entry(5), state(version=2, inflight=(5, 8)), Action.APPLY),  # only older entries hold it back
        (entry(5), state(tomb=4, inflight=(3, 5)), Action.APPLY),  # 3 was applied before the delete at 4
        # a generation being rebuilt holds a record (version 2) the serving one deleted at 6
        (entry(6, Op.DELETE), state(version=2, tomb=6), Action.APPLY),  # the replayed delete removes it
        (
            entry(4),
            state(version=2, tomb=6),
            Action.SKIP,
        ),  # an upsert older than the delete does not revive it
        (entry(8, Op.APPEND), state(version=2, tomb=6), Action.APPLY),  # re-created after the delete
    ],
)
def test_decide(e: Entry, s: DocState, want: Action) -> None:
    assert decide(e, s) is want


def test_append_after_a_delete_starts_afresh() -> None:
    """An append to a stale record (deleted in the serving generation) re-creates the document from its
    chunk alone, as an append to a deleted document does."""
    steps = plan([entry(8, Op.APPEND, "chunk")], [state(version=2, tomb=6)])
    assert steps[0].request == "chunk" and not steps[0].live


def test_step_request_and_runs() -> None:
    up, app, dele = entry(1), entry(2, Op.APPEND, "more"), entry(3, Op.DELETE)
    steps = plan([up, app, dele], [state(), state(version=1), state(version=2)])
    assert [s.action for s in steps] == [Action.APPLY, Action.APPLY, Action.APPLY]
    assert steps[0].request == "t" and steps[2].request is None
    assert isinstance(steps[1], Step) and steps[1].expected == "1-0"
    assert [[e.entry_id for e in run] for run in unique_runs([up, entry(4, doc="Y"), app, dele])] == [
        ["1-0", "4-0"],
        ["2-0"],
        ["3-0"],
    ]


# ----- simulation: two consumers, crashes, claims, redeliveries -----
@dataclass
class Store:
    """The stored state of document X as the daemons would leave it in Redis."""

    text: str | None = None
    version: str | None = None  # of the record
    tombstone: str | None = None
    inflight: list[str] = field(default_factory=list)

    def state(self) -> DocState:
        rec = Record(1, "X", None, self.version) if self.text is not None else None  # type: ignore[arg-type]
        return DocState(1, rec, self.tombstone, tuple(self.inflight))

    def apply(self, e: Entry) -> None:
        if e.op is Op.DELETE:
            self.text, self.version = None, None
            self.tombstone = (
                e.entry_id if self.tombstone is None else max(self.tombstone, e.entry_id, key=sid)
            )
            return
        assert e.text is not None
        self.text = self.text + "\n" + e.text if e.op is Op.APPEND and self.text is not None else e.text
        self.version = e.entry_id


def sequential(entries: list[Entry]) -> str | None:
    s = Store()
    for e in entries:
        s.apply(e)
    return s.text


class World:
    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries
        self.next = 0
        self.store = Store()
        self.held: list[list[Entry]] = [[], []]
        self.orphans: list[Entry] = []
        self.acked: set[str] = set()

    def read(self, c: int, k: int) -> None:
        got = self.entries[self.next : self.next + k]
        self.next += len(got)
        self.held[c] += got
        self.store.inflight += [e.entry_id for e in got]  # registered atomically with the delivery

    def step(self, e: Entry) -> bool:
        """Process one entry; True when it is done (acknowledged)."""
        action = decide(e, self.store.state())
        if action is Action.DEFER:
            return False
        if action is Action.APPLY:
            self.store.apply(e)
        return True

    def process(self, c: int) -> bool:
        """Consumer c handles its held entries as one batch (in order); True if anything was acknowledged."""
        done = [e for e in self.held[c] if self.step(e)]
        for e in done:
            self.ack(c, e)
        return bool(done)

    def ack(self, c: int, e: Entry) -> None:
        self.held[c].remove(e)
        self.store.inflight.remove(e.entry_id)
        self.acked.add(e.entry_id)

    def crash(self, c: int, apply_first: bool) -> None:
        """Consumer c dies, maybe after writing its first entry but before acknowledging it."""
        if apply_first and self.held[c]:
            self.step(self.held[c][0])
        self.orphans += self.held[c]
        self.held[c] = []

    def claim(self, c: int) -> None:
        self.held[c] = sorted(self.held[c] + self.orphans, key=lambda e: sid(e.entry_id))
        self.orphans = []

    def finish(self) -> None:
        self.read(0, len(self.entries))
        self.claim(0)
        for _ in range(2 * len(self.entries) + 2):
            progressed = self.process(1) | self.process(0)
            if not self.held[0] and not self.held[1]:
                return
            assert progressed, f"no consumer can make progress: {self.held}, {self.store}"


ops = st.sampled_from([Op.UPSERT, Op.APPEND, Op.DELETE])
events = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.integers(0, 1), st.integers(1, 3)),
        st.tuples(st.just("process"), st.integers(0, 1), st.just(0)),
        st.tuples(st.just("crash"), st.integers(0, 1), st.booleans()),
        st.tuples(st.just("claim"), st.integers(0, 1), st.just(0)),
    ),
    max_size=14,
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ops, min_size=1, max_size=5), events)
def test_any_interleaving_ends_as_stream_order(kinds: list[Op], script: list[tuple[str, int, Any]]) -> None:
    """For one document and up to five of its entries over two consumers, with crashes (before or after
    writing), claims and redeliveries, the final state equals applying the entries in stream order."""
    entries = [entry(i + 1, op, f"t{i + 1}") for i, op in enumerate(kinds)]
    world = World(entries)
    for kind, c, arg in script:
        if kind == "read":
            world.read(c, arg)
        elif kind == "process":
            world.process(c)
        elif kind == "crash":
            world.crash(c, arg)
        else:
            world.claim(c)
    world.finish()
    assert world.store.text == sequential(entries)
    assert world.acked == {e.entry_id for e in entries} and world.store.inflight == []


def test_the_pure_layer_imports_neither_redis_nor_settings() -> None:
    """The algorithms and decisions load without Redis or pydantic-settings (they can be used and tested alone)."""
    import subprocess
    import sys

    pure = [
        "daemon.planner",
        "similarity.spec",
        "similarity.shingling",
        "similarity.minhash",
        "similarity.lsh",
        "index.record",
        "index.buckets",
        "similarity.fingerprint",
        "daemon.entries",
        "similarity.verify",
        "similarity.hashing",
        "similarity.tuning",
        "similarity.bounds",
        "similarity.matches",
    ]
    code = (
        "import sys; "
        + "; ".join(f"import dedupd.{m}" for m in pure)
        + "; print(sorted(m for m in ('redis', 'pydantic_settings', 'pydantic') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
