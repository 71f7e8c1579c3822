"""One batch of input entries: validate, fingerprint, index, verify, alert, basket, dead-letter.

Every write is idempotent or guarded, so a redelivered entry changes nothing and emits nothing new:
bucket joins and leaves are idempotent, a record remembers the input entry that last changed it (an older
or the same entry does not change it again), and alerts, baskets and dead letters are emitted once per
input entry id (``lua.EMIT_MANY``, one call per batch and stream). The caller acknowledges the returned entry ids only after
:meth:`Processor.process` returns, i.e. after all writes.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd import lua
from dedupd.connection import ScriptPipeline
from dedupd.entries import MAX_DELIVERIES, Entry, Op, parse_entry
from dedupd.errors import InputError
from dedupd.fingerprint import AppendTo, Fingerprint
from dedupd.hashing import U64Array
from dedupd.index import DocWrite, Index
from dedupd.record import Record, encode_record, record_doc_id
from dedupd.keys import Keys
from dedupd.settings import Settings
from dedupd.verify import agreement_pairs, jaccard_pairs

log = logging.getLogger(__name__)

RawEntry = tuple[str, dict[bytes, bytes]]
_WORDS = re.compile(r"\w+")
_MAX_ATTEMPTS = 8


def stream_id_key(entry_id: str) -> tuple[int, int]:
    """Sortable form of a stream entry id ``ms-seq``."""
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True, slots=True)
class Alert:
    """A verified duplicate: the fields of one alerts-stream entry."""

    doc_id: str
    matches: tuple[tuple[str, float], ...]  # best first
    cluster: str
    input: str
    verify: str
    source: str | None
    meta: str | None

    def fields(self) -> dict[str, str]:
        out = {
            "id": self.doc_id,
            "duplicate_of": self.matches[0][0],
            "similarity": f"{self.matches[0][1]:.4f}",
            "matches": json.dumps([[m, round(s, 4)] for m, s in self.matches]),
            "cluster": self.cluster,
            "input": self.input,
            "verify": self.verify,
        }
        if self.source is not None:
            out["source"] = self.source
        if self.meta is not None:
            out["meta"] = self.meta
        return out


@dataclass(slots=True)
class BatchResult:
    """What a batch did."""

    ack: list[str] = field(default_factory=list)
    processed: int = 0
    alerts: list[Alert] = field(default_factory=list)
    dead: int = 0


class Processor:
    """Processes batches against one index."""

    def __init__(self, client: Any, settings: Settings, index: Index, shadow: bool = False) -> None:
        self.client = client
        self.settings = settings
        self.index = index
        self.shadow = shadow  # index writes only (the next generation during a rebuild): no outputs
        self.keys: Keys = index.keys
        self.fingerprinter = index.fingerprinter
        self._emit = client.register_script(lua.EMIT_MANY)
        self._union = client.register_script(lua.UNION_FIND)

    def warm_up(self) -> None:
        """Load the compiled kernels (numba: from the on-disk cache, or compiled on a first run) before
        the first batch, so that the first entries do not wait for them."""
        fps = self.fingerprinter.compute(["warm the kernels up", "wärm them ûp"])
        jaccard_pairs([fps[0].shingles, fps[1].shingles], np.zeros(1, np.int64), np.ones(1, np.int64))

    # ----- entry point -----
    def process(self, raw: Sequence[RawEntry], deliveries: dict[str, int] | None = None) -> BatchResult:
        """Process raw entries; returns the entry ids to acknowledge (all of them) and what happened."""
        result = BatchResult()
        dead: list[tuple[RawEntry, str, str]] = []
        valid: list[Entry] = []
        for entry_id, fields in raw:
            count = (deliveries or {}).get(entry_id, 1)
            if count > self.settings.max_deliveries:
                dead.append(((entry_id, fields), MAX_DELIVERIES,
                             f"delivered {count} times (max_deliveries={self.settings.max_deliveries})"))
                continue
            try:
                valid.append(parse_entry(entry_id, fields, self.settings.max_doc_bytes, self.settings.max_id_bytes))
            except InputError as exc:
                dead.append(((entry_id, fields), exc.code, exc.detail))
        for part in _unique_runs(valid):
            self._process_unique(part, result)
        if dead and not self.shadow:
            self.dead_letter(dead)
            result.dead = len(dead)
        result.ack = [entry_id for entry_id, _ in raw]
        return result

    def dead_letter(self, dead: Sequence[tuple[RawEntry, str, str]]) -> None:
        """Write dead letters (original fields + error + detail), once per input entry."""
        pipe = ScriptPipeline(self.client)
        entries: list[tuple[str, list[Any]]] = []
        for (entry_id, fields), code, detail in dead:
            pairs: list[Any] = []
            for k, v in fields.items():
                if k not in (b"error", b"detail", b"input"):
                    pairs += [k, v]
            pairs += ["error", code, "detail", detail, "input", entry_id]
            entries.append((entry_id, pairs))
        self._emit_many(pipe, self.keys.dead, self.settings.dead_retention, entries)
        pipe.pipe.hincrby(self.keys.counters, "dead", len(dead))
        pipe.execute()
        for (entry_id, _), code, detail in dead:
            log.warning("dead-lettered %s: %s (%s)", entry_id, code, detail)

    # ----- one run of entries with distinct document ids -----
    def _process_unique(self, entries: Sequence[Entry], result: BatchResult, attempt: int = 1) -> None:
        nums = self.index.resolve_ids([(e.doc_id, e.op is not Op.DELETE) for e in entries])
        existing = self.index.load_records(n for n in nums if n > 0)
        requests: list[str | AppendTo] = []
        plan: list[tuple[Entry, int, Record | None, int | Fingerprint | None]] = []
        stored_in: dict[int, str] = {}  # entry that last changed a document we leave as it is
        expected: dict[int, str] = {}  # the input entry id of each record as read ('' = none)
        for e, n in zip(entries, nums, strict=True):
            num = abs(n)
            old = existing.get(n) if n > 0 else None
            if num:
                expected[num] = old.entry_id if old is not None else ""
            if e.op is Op.DELETE:
                if old is not None and old.entry_id and stream_id_key(old.entry_id) > stream_id_key(e.entry_id):
                    plan.append((e, 0, None, None))  # a later entry re-created it: this delete is stale
                else:
                    plan.append((e, num, old, None))
                continue
            if old is not None and old.entry_id and stream_id_key(old.entry_id) >= stream_id_key(e.entry_id):
                # this entry (or a later one) was already applied: keep the stored state
                plan.append((e, num, None, old.fingerprint))
                stored_in[num] = old.entry_id
                continue
            assert e.text is not None
            if e.op is Op.APPEND and old is not None:
                requests.append(AppendTo(old.fingerprint, e.text))
            else:
                requests.append(e.text)
            plan.append((e, num, old, len(requests) - 1))
        fps = self.fingerprinter.compute(requests)

        # band hashes of every old and new fingerprint of the run, in one vectorized call
        resolved: list[tuple[Fingerprint | None, Fingerprint | None]] = []
        for e, num, old, ref in plan:
            new = None if ref is None else (ref if isinstance(ref, Fingerprint) else fps[ref])
            resolved.append((old.fingerprint if old is not None else None, new))
        flat = [fp for pair in resolved for fp in pair if fp is not None and not fp.empty]
        hashes = self.fingerprinter.band_hashes(flat)
        row = {id(fp): i for i, fp in enumerate(flat)}
        none = np.zeros(0, dtype=np.uint64)

        def bands(fp: Fingerprint | None) -> U64Array:
            return hashes[row[id(fp)]] if fp is not None and id(fp) in row else none

        writes: list[DocWrite] = []
        new_fps: dict[int, tuple[str, Fingerprint, str]] = {}
        for (e, num, old, ref), (old_fp, fp) in zip(plan, resolved, strict=True):
            w = DocWrite(num, expected=expected.get(num))
            old_bands = bands(old_fp)
            if fp is None:  # delete
                if num:
                    w.remove = old_bands
                    w.delete_id = e.doc_id
                writes.append(w)
                continue
            w.add = bands(fp)
            w.rejoin = isinstance(ref, Fingerprint)  # applied before: its buckets already hold it
            w.remove = old_bands if old_bands.size != w.add.size else np.where(old_bands != w.add, old_bands, 0)
            if not isinstance(ref, Fingerprint):
                w.record = encode_record(e.doc_id, fp, e.entry_id, e.source, self.index.store_shingles)
            new_fps[num] = (e.doc_id, fp, stored_in.get(num, e.entry_id))
            writes.append(w)
        found = self.index.apply(writes)
        retry = [e for (e, *_), f in zip(plan, found, strict=True) if f is None]
        for (_, num, _, _), f in zip(plan, found, strict=True):
            if f is None:  # another consumer changed this document first: nothing of ours was written
                new_fps.pop(num, None)

        # verify candidates
        wanted = {c for cands in found if cands for c in cands if c not in new_fps}
        others = self.index.load_records(wanted) if wanted else {}
        alerts: list[tuple[Entry, int, list[tuple[str, float, int]]]] = []
        # every (document, candidate) pair of the batch, verified in one call
        pairs: list[tuple[int, int, int, str, Fingerprint]] = []  # plan index, num, candidate, its id and fp
        for p, ((e, num, _, ref), cands) in enumerate(zip(plan, found, strict=True)):
            if ref is None or not cands or num not in new_fps:
                continue
            for c in cands:
                if c in new_fps:
                    cid, cfp, _ = new_fps[c]
                else:
                    rec = others.get(c)
                    if rec is None:
                        continue  # deleted meanwhile
                    cid, cfp = rec.doc_id, rec.fingerprint
                pairs.append((p, num, c, cid, cfp))
        sims = self._similarities([(new_fps[num][1], cfp) for _, num, _, _, cfp in pairs])
        by_plan: dict[int, list[tuple[str, float, int]]] = {}  # plan index -> matches (id, similarity, num)
        for (p, _, c, cid, _), sim in zip(pairs, sims.tolist(), strict=True):
            if sim >= self.settings.threshold:
                by_plan.setdefault(p, []).append((cid, sim, c))
        for p, matches in by_plan.items():
            e, num, _, _ = plan[p]
            matches.sort(key=lambda m: (-m[1], m[0]))
            alerts.append((e, num, matches))
        done = [e for (e, *_), f in zip(plan, found, strict=True) if f is not None]
        if not self.shadow:
            self._emit_outputs(done, alerts, result)
        result.processed += len(done)
        if retry:
            if attempt >= _MAX_ATTEMPTS:
                raise RuntimeError(f"{len(retry)} documents kept changing under concurrent updates")
            log.info("%d documents changed under a concurrent update; processing them again", len(retry))
            self._process_unique(retry, result, attempt + 1)

    def _similarities(self, pairs: Sequence[tuple[Fingerprint, Fingerprint]]) -> npt.NDArray[np.float64]:
        """Similarity of each pair: exact Jaccard of the shingle sets when verification is exact and both
        documents have them, else the signature estimate."""
        out = np.zeros(len(pairs), dtype=np.float64)
        if not pairs:
            return out
        exact = self.settings.verify == "exact"
        rows: dict[int, int] = {}
        fps: list[Fingerprint] = []
        left = np.empty(len(pairs), dtype=np.int64)
        right = np.empty(len(pairs), dtype=np.int64)
        use_sets = np.empty(len(pairs), dtype=bool)
        for i, (a, b) in enumerate(pairs):
            for side, fp in ((left, a), (right, b)):
                row = rows.get(id(fp))
                if row is None:
                    row = rows[id(fp)] = len(fps)
                    fps.append(fp)
                side[i] = row
            use_sets[i] = exact and a.shingles.size > 0 and b.shingles.size > 0
        if use_sets.any():
            out[use_sets] = jaccard_pairs([fp.shingles for fp in fps], left[use_sets], right[use_sets])
        if not use_sets.all():
            sigs = np.stack([fp.signature for fp in fps])
            out[~use_sets] = agreement_pairs(sigs, left[~use_sets], right[~use_sets])
        return out

    def _basket(self, e: Entry) -> list[str] | None:
        if e.op is Op.DELETE or self.settings.baskets == "none":
            return None
        if e.items is not None:
            return list(e.items)
        if self.settings.baskets == "words" and e.text:
            return sorted(set(_WORDS.findall(e.text.lower())))
        return None

    def _cluster_names(self, roots: list[int], known: dict[int, str]) -> list[str]:
        """A cluster is named by its root (oldest) document's id; ``#n`` if that document is gone."""
        missing = [n for n in dict.fromkeys(roots) if n not in known]
        if missing:
            pipe = self.client.pipeline(transaction=False)
            for n in missing:
                pipe.get(self.keys.doc(n, self.index.generation))
            for n, blob in zip(missing, pipe.execute(), strict=True):
                known[n] = record_doc_id(blob) if blob else f"#{n}"
        return [known[n] for n in roots]

    def _emit_many(self, pipe: ScriptPipeline, stream: str, retention: int,
                   entries: Sequence[tuple[str, list[Any]]]) -> None:
        """Queue one call appending each (input entry id, field/value list) to ``stream`` once per entry id."""
        if not entries:
            return
        args: list[Any] = [int(time.time() * 1000), retention, self.settings.seen_ttl_s * 1000]
        for marker, pairs in entries:
            args += [marker, len(pairs) // 2, *pairs]
        pipe.script(self._emit, [stream, self.keys.seen(stream)], args)

    def _emit_outputs(self, entries: Sequence[Entry], alerts: list[tuple[Entry, int, list[tuple[str, float, int]]]],
                      result: BatchResult) -> None:
        roots: list[str] = []
        if alerts:
            args: list[Any] = []
            names: dict[int, str] = {}
            for e, num, matches in alerts:
                args += [num, len(matches), *[m[2] for m in matches]]
                names[num] = e.doc_id
                names.update((m[2], m[0]) for m in matches)
            root_nums = [int(x) for x in self._union(keys=[self.keys.uf_parent], args=args)]
            roots = self._cluster_names(root_nums, names)
        pipe = ScriptPipeline(self.client)
        out: list[tuple[str, list[Any]]] = []
        for (e, _, matches), root in zip(alerts, roots, strict=True):
            alert = Alert(e.doc_id, tuple((m[0], m[1]) for m in matches), root, e.entry_id,
                          self.settings.verify, e.source, e.meta)
            result.alerts.append(alert)
            out.append((e.entry_id, [x for kv in alert.fields().items() for x in kv]))
        self._emit_many(pipe, self.keys.alerts, self.settings.alerts_retention, out)
        out = []
        for e in entries:
            basket = self._basket(e)
            if basket is not None:
                out.append((e.entry_id, ["id", e.doc_id, "items", json.dumps(basket, ensure_ascii=False)]))
        self._emit_many(pipe, self.keys.baskets, self.settings.basket_retention, out)
        pipe.pipe.hincrby(self.keys.counters, "processed", len(entries))
        if alerts:
            pipe.pipe.hincrby(self.keys.counters, "alerts", len(alerts))
        pipe.execute()


def _unique_runs(entries: Sequence[Entry]) -> list[list[Entry]]:
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
