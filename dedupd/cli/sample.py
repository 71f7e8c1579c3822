"""``dedupd tune --sample FILE``: the sample read as ``dedupd push`` reads it, and its report printed.

The computation is pure and lives in :mod:`dedupd.similarity.near_pairs` (the pairs) and
:mod:`dedupd.similarity.pair_distribution` (the bins and the thresholds); this module reads the documents,
shows progress when the work takes more than a second, and prints.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from dedupd.cli.common import PhaseBar, plural
from dedupd.errors import ConfigError
from dedupd.ops.producer import BadLine, Item, directory_items, read_items

if TYPE_CHECKING:  # (the similarity code, and numba, load only when a sample is read)
    from dedupd.similarity.pair_distribution import Example, SampleReport

DEFAULT_LIMIT = 20_000
_SHOWN_BAD = 5  # bad lines reported one by one; the rest are counted
_ID_WIDTH = 28  # an example's ids are cut to this many characters
_CONTEXT_WORDS = 3  # words shown before where two examples' texts first differ
_SNIPPET = 60  # characters of each side of a difference


@dataclass(slots=True)
class Sample:
    """The documents of a sample file as the index would hold them after its entries: upserts replace,
    appends extend, deletes remove (queries and bad lines are skipped), in order of first appearance."""

    name: str
    texts: dict[str, str] = field(default_factory=dict)
    cut: bool = False  # the file holds more documents than the limit
    bad: int = 0
    queries: int = 0

    @property
    def ids(self) -> list[str]:
        return list(self.texts)


def read_sample(file: str, fmt: str, limit: int, max_doc_bytes: int, max_id_bytes: int) -> Sample:
    """The first ``limit`` documents of FILE (``-``: standard input; a directory: one per file), read as
    ``dedupd push`` reads them; bad lines are reported on stderr and skipped.

    Raises:
        ConfigError: when FILE holds fewer than two documents with text.
    """
    name = "stdin" if file == "-" else os.path.basename(os.path.normpath(file)) or file
    name = os.fsencode(name).decode("utf-8", "backslashreplace")
    sample = Sample(name)

    def warn(message: str) -> None:
        click.echo(f"dedupd: warning: {message}", err=True)

    with contextlib.ExitStack() as stack:
        if file != "-" and os.path.isdir(file):
            items: Any = directory_items(Path(file), max_doc_bytes, max_id_bytes=max_id_bytes)
        else:
            if fmt == "files":
                raise ConfigError(f"--format files reads a directory; {file} is not one")
            stream = sys.stdin.buffer if file == "-" else stack.enter_context(open(file, "rb"))
            items = read_items(stream, fmt, f"{name}:", name, warn=warn, max_id_bytes=max_id_bytes)
        for item in items:
            if not _take(sample, item, limit):
                sample.cut = True
                break
    if sample.bad > _SHOWN_BAD:
        click.echo(f"{name}: skipped {plural(sample.bad, 'bad line')} in all", err=True)
    if len(sample.texts) < 2:
        raise ConfigError(
            f"{name} holds {plural(len(sample.texts), 'document')} with text: a sample needs at least two "
            "(JSONL objects with id and text, or plain text, one document per line)"
        )
    return sample


def _take(sample: Sample, item: Item | None, limit: int) -> bool:
    """Apply one item to the sample; False when it is a new document beyond ``limit``."""
    if item is None:
        return True
    if isinstance(item, BadLine):
        _bad(sample, item.where if item.where is not None else str(item.line_no), item.reason)
        return True
    op, doc_id, text = item.get("op", "upsert"), item.get("id", ""), item.get("text")
    if op == "query":
        sample.queries += 1
    elif op == "delete":
        sample.texts.pop(doc_id, None)
    elif op not in ("upsert", "append") or not doc_id or text is None:
        _bad(sample, doc_id or "?", f"op {op!r}" if op not in ("upsert", "append") else "no id or no text")
    elif doc_id not in sample.texts and len(sample.texts) >= limit:
        return False
    elif op == "append" and doc_id in sample.texts:
        sample.texts[doc_id] += "\n" + text
    else:
        sample.texts[doc_id] = text
    return True


def _bad(sample: Sample, where: str, reason: str) -> None:
    sample.bad += 1
    if sample.bad <= _SHOWN_BAD:
        click.echo(f"{sample.name}:{where}: skipped: {reason}", err=True)


class LateProgress(PhaseBar):
    """Progress on stderr once the work has taken more than ``after_s``: a bar per phase on a terminal,
    else a line per phase."""

    def __init__(self, after_s: float = 1.0) -> None:
        super().__init__()
        self.started = time.monotonic()
        self.after_s = after_s
        self.tty = sys.stderr.isatty()

    def __call__(self, phase: str, done: int, total: int | None) -> None:
        if self.phase is None and time.monotonic() - self.started < self.after_s:
            return
        if not self.tty:
            if phase != self.phase:
                self.phase = phase
                click.echo(f"dedupd: {phase}...", err=True)
            return
        self.update(phase, done, total)


def render_sample(report: SampleReport, sample: Sample, shingle: str) -> str:
    """The distribution table, the examples and the thresholds, as ``dedupd tune --sample`` prints them."""
    from dedupd.similarity.pair_distribution import BUCKET_ENTRY_BYTES

    ids, texts = sample.ids, list(sample.texts.values())
    head = f"sample: {plural(report.documents, 'document')} of {sample.name}, {shingle} shingles"
    if sample.cut:
        head += f" (the first {report.documents:,}: the file holds more; --limit N reads more)"
    lines = [head]
    if report.without_shingles:
        lines.append(f"{plural(report.without_shingles, 'document')} without any shingle: never matched")
    lines += [
        _how_found(report),
        "",
        f"near pairs by exact Jaccard similarity ({shingle}); pairs below {report.lowest:g} are not counted:",
        f"  {'Jaccard':<9} {'pairs':>9} {'at or above':>12}  example",
    ]
    for b in report.bins:
        example = f"{_pair(b.example, ids)} ({b.example.jaccard:.3f})" if b.example else ""
        lines.append(f"  {_bin(b.low, b.high):<9} {b.pairs:>9,} {b.at_or_above:>12,}  {example}".rstrip())
    if report.identical_pairs:
        lines.append(f"  ({plural(report.identical_pairs, 'pair')} of documents with the same shingles)")
    shown = [b.example for b in report.bins if b.example is not None]
    if shown:
        lines += ["", "examples, where the two texts first differ:"]
    width = max((len(_cut(ids[i])) for e in shown for i in (e.left, e.right)), default=0)
    for b in report.bins:
        if (e := b.example) is not None:
            left, right = difference(texts[e.left], texts[e.right])
            lines += [
                f"  {_bin(b.low, b.high)}  {_pair(e, ids)}  (Jaccard {e.jaccard:.3f})",
                f"    {_cut(ids[e.left]):<{width}}  {left}",
                f"    {_cut(ids[e.right]):<{width}}  {right}",
            ]
    lines += [
        "",
        f"what each threshold would catch in this sample, and cost (num_perm {report.num_perm}):",
        f"  {'threshold':>9} {'pairs':>9} {'documents':>10} {'alerts':>8}  {'bands x rows':>12} "
        f"{'FN at t+.05':>11} {'FP at t-.1':>10} {'buckets/doc':>11}",
    ]
    for t in report.thresholds:
        mark = "  <- configured" if t.configured else ""
        lines.append(
            f"  {t.threshold:>9g} {t.pairs:>9,} {t.documents:>10,} {t.alerts:>8,}  "
            f"{f'{t.bands} x {t.rows}':>12} {_pct(t.fn_rate):>11} {_pct(t.fp_rate):>10} "
            f"{t.bucket_bytes:>9,.0f} B{mark}"
        )
    lines += [
        "  documents: in a pair at or above the threshold; alerts: one per document with an earlier such",
        "  document (in sample order), what `dedupd serve` would write; FN: pairs at t + 0.05 that LSH never",
        "  compares; FP: pairs at t - 0.1 it compares (each verified away); buckets/doc: Redis memory of a",
        f"  document's band buckets (about {BUCKET_ENTRY_BYTES} bytes a band).",
    ]
    return "\n".join(lines)


def sample_dict(report: SampleReport, sample: Sample) -> dict[str, Any]:
    """``tune --sample --json``'s ``sample``: the report, each example's documents named by their ids."""
    ids = sample.ids
    out = report.to_dict()
    for b in out["bins"]:
        if (ex := b["example"]) is not None:
            b["example"] = {"ids": [ids[ex["left"]], ids[ex["right"]]], "jaccard": ex["jaccard"]}
    return {"file": sample.name, "cut": sample.cut, "bad": sample.bad, **out}


def _how_found(report: SampleReport) -> str:
    if report.method == "all pairs":
        return (
            f"every pair of its {plural(report.distinct, 'distinct text')} compared "
            f"({report.compared:,} pairs): the counts are exact"
        )
    return (
        f"{report.compared:,} candidate pairs of its {plural(report.distinct, 'distinct text')} found by LSH "
        f"and compared exactly; a pair at {report.lowest:g} is missed with probability "
        f"{report.miss_probability:.1e}, a nearer one less often"
    )


def _bin(low: float, high: float) -> str:
    """A bin's label: ``0.3-0.4`` (``0.25-0.35`` when the bins start off the tenths).

    >>> _bin(0.3, 0.4), _bin(0.9, 1.0), _bin(0.25, 0.35)
    ('0.3-0.4', '0.9-1.0', '0.25-0.35')
    """
    return "-".join(f"{x:.1f}" if abs(x * 10 - round(x * 10)) < 1e-9 else f"{x:g}" for x in (low, high))


def _pair(example: Example, ids: list[str]) -> str:
    return f"{_cut(ids[example.left])} ~ {_cut(ids[example.right])}"


def _cut(text: str, width: int = _ID_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _pct(x: float) -> str:
    if x == 0.0:
        return "0%"
    return f"{100 * x:.2f}%" if x >= 0.0001 else f"{100 * x:.0e}%"


def difference(a: str, b: str) -> tuple[str, str]:
    """Where two texts first differ, word by word: a few words before it, then each side's words.

    >>> difference("the cat sat on the mat", "the cat sat on the mat by Jo")
    ('"...on the mat"', '"...on the mat by Jo"')
    >>> difference("Same words", "same  words")
    ('(the same words, but for case or spacing)', '')
    """
    wa, wb = a.split(), b.split()
    ops = SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes()
    diff = next((op for op in ops if op[0] != "equal"), None)
    if diff is None or [w.lower() for w in wa] == [w.lower() for w in wb]:
        return "(the same words, but for case or spacing)", ""
    _, i1, i2, j1, j2 = diff
    start = max(0, min(i1, j1) - _CONTEXT_WORDS)
    return _snippet(wa, start, max(i2, i1 + 1)), _snippet(wb, start, max(j2, j1 + 1))


def _snippet(words: list[str], start: int, stop: int) -> str:
    text = " ".join(words[start:stop])
    if len(text) > _SNIPPET:
        text = text[: _SNIPPET - 3] + "..."
    more = "..." if stop < len(words) else ""
    return f'"{"..." if start else ""}{text}{more}"' if text else "(nothing)"
