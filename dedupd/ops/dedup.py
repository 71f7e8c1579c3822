"""``dedupd dedup``: the near-duplicates of a file removed in one command, by the engine of ``dedupd serve``
on a private Redis (no server to run, nothing of the user's touched).

:func:`dedup` reads the input as ``dedupd push`` does (JSONL with the stream fields, or plain text one
document per line; dedupd/ops/producer.py), gives every document to the daemon's processor in file order
(dedupd/ops/inprocess.py) on a private redis-server in a temporary directory (dedupd/server/private.py),
reads the final clusters, and writes the documents to keep, each line exactly as it was in the input, in
input order: the first document of each cluster, or with ``keep="longest"`` the one with the longest text
(the first of those on a tie). Optionally one JSON line per cluster of two or more documents.

Every line is a document, even when two lines carry the same ``id`` (a repeated record is a duplicate like
any other). Bad lines are reported and left out, as ``push`` leaves them out: not UTF-8, invalid JSON, no
text, an ``op`` other than ``upsert``, a text or id larger than the daemon's bounds. The input is read
twice: a regular file (as the opened file says, whatever its name: standard input redirected from a file
too) again from where the first pass started, anything else (a pipe, a FIFO, the ``/dev/fd/N`` of a
process substitution) from a copy in the private server's temporary directory, removed with it
(:func:`rereadable_from`).

>>> Summary(63_436, 54_741, 7_904, 0, 12.34).line()
'63,436 documents, 54,741 kept, 8,695 dropped in 7,904 clusters, 12.3 s'
>>> Summary(2, 1, 1, 0, 0.04).line()
'2 documents, 1 kept, 1 dropped in 1 cluster, 0.0 s'
"""

from __future__ import annotations

import array
import contextlib
import json
import logging
import os
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.ops.inprocess import InProcessEngine, Refused
from dedupd.ops.producer import JSONL_AUTO, BadLine, PlainTextLines, detect_format, parse_line, read_lines
from dedupd.server.connection import connect
from dedupd.server.private import private_redis
from dedupd.settings import Settings

KEEPS = ("first", "longest")
FORMATS = ("auto", "jsonl", "text")
# documents per batch of the engine unless batch_size is set: the daemon reads 256 entries at a time (a
# latency it keeps low); a whole file is done in fewer round trips with larger batches
BATCH_SIZE = 1000
I64Array = npt.NDArray[np.int64]
log = logging.getLogger("dedupd.dedup")


@dataclass(frozen=True, slots=True)
class Summary:
    """What a dedup did: documents read, kept, clusters of two or more, bad lines left out, seconds."""

    documents: int
    kept: int
    clusters: int
    bad: int
    seconds: float

    @property
    def dropped(self) -> int:
        return self.documents - self.kept

    def line(self) -> str:
        """The one-line summary the command prints."""
        return (
            f"{_count(self.documents, 'document')}, {self.kept:,} kept, {self.dropped:,} dropped in "
            f"{_count(self.clusters, 'cluster')}, {self.seconds:.1f} s"
        )


def _count(n: int, one: str) -> str:
    return f"{n:,} {one}{'' if n == 1 else 's'}"


@dataclass(frozen=True, slots=True)
class Cluster:
    """A cluster of two or more documents: its name (the id of its first document, as an alert names it),
    the id of the document kept, and the ids of its members in input order."""

    name: str
    kept: str
    members: list[str]

    def to_json(self) -> str:
        return json.dumps(
            {"cluster": self.name, "kept": self.kept, "members": self.members}, ensure_ascii=False
        )


class _Documents:
    """The documents read so far: per document its line number and text length (and id, when asked)."""

    def __init__(self, with_ids: bool) -> None:
        self.lines = array.array("q")
        self.lengths = array.array("q")
        self.ids: list[str] | None = [] if with_ids else None

    def add(self, line_no: int, doc_id: str, text: str) -> None:
        self.lines.append(line_no)
        self.lengths.append(len(text))
        if self.ids is not None:
            self.ids.append(doc_id)


def kept_documents(labels: I64Array, lengths: I64Array, keep: str) -> I64Array:
    """The documents to keep, by index, in input order: per cluster (``labels``: the index of its first
    document; -1: no document), the first, or with ``keep="longest"`` the longest (the first on a tie).

    >>> kept_documents(np.array([0, 0, 2, 0, -1]), np.array([5, 9, 1, 9, 7]), "first").tolist()
    [0, 2]
    >>> kept_documents(np.array([0, 0, 2, 0, -1]), np.array([5, 9, 1, 9, 7]), "longest").tolist()
    [1, 2]
    """
    if keep not in KEEPS:
        raise ConfigError(f"keep must be one of {', '.join(KEEPS)}, not {keep!r}")
    idx = np.flatnonzero(labels >= 0)
    if keep == "first":
        firsts: I64Array = idx[labels[idx] == idx]
        return firsts
    lab = labels[idx]
    order = np.lexsort((idx, -lengths[idx], lab))  # by cluster, the longest first, then input order
    heads = np.ones(order.size, dtype=bool)
    heads[1:] = lab[order][1:] != lab[order][:-1]
    out: I64Array = np.sort(idx[order[heads]])
    return out


def clusters_of(labels: I64Array, kept: I64Array, ids: list[str]) -> Iterator[Cluster]:
    """The clusters of two or more documents, in the input order of their first documents.

    >>> [c.to_json() for c in clusters_of(np.array([0, 0, 2, 0]), np.array([1, 2]), ["a", "b", "c", "d"])]
    ['{"cluster": "a", "kept": "b", "members": ["a", "b", "d"]}']
    """
    idx = np.flatnonzero(labels >= 0)
    sizes = np.bincount(labels[idx], minlength=labels.size)
    kept_of = np.full(labels.size, -1, dtype=np.int64)
    kept_of[labels[kept]] = kept
    members = idx[sizes[labels[idx]] >= 2]
    members = members[np.argsort(labels[members], kind="stable")]
    if not members.size:
        return
    bounds = np.flatnonzero(np.diff(labels[members])) + 1
    for group in np.split(members, bounds):
        first = int(group[0])
        yield Cluster(ids[first], ids[int(kept_of[first])], [ids[i] for i in group.tolist()])


_IDLE_S = 0.25  # how often the checkpoint is called while a pipe gives no line


def dedup(
    source: Path | BinaryIO,
    output: BinaryIO,
    settings: Settings,
    *,
    keep: str = "first",
    fmt: str = "auto",
    id_prefix: str | None = None,
    name: str | None = None,
    clusters: TextIO | None = None,
    on_bad: Callable[[BadLine], None] | None = None,
    on_bytes: Callable[[int], None] | None = None,
    warn: Callable[[str], None] | None = None,
    checkpoint: Callable[[], None] | None = None,
) -> Summary:
    """Remove the near-duplicates of ``source`` (see the module docstring).

    Args:
        source: a file's path, or a binary stream (read to its end; copied while read unless it is a
            regular file).
        output: where the lines to keep are written (bytes, each line as it was, with a line break).
        settings: the similarity settings and input bounds (those of ``dedupd serve``; where the user's
            Redis is, and its key prefix, play no part).
        keep: ``first`` or ``longest``.
        fmt: ``auto`` (as ``dedupd push`` reads it: JSONL when the first line is a JSON object, else each
            line starting with ``{`` JSONL and any other text), ``jsonl`` or ``text``.
        id_prefix: the id of a line without one is ``<id_prefix><line number>`` (default: ``<name>:``).
        name: the input's name in ids and messages (default: the file's name, or ``stdin``).
        clusters: where to write one JSON line per cluster of two or more documents (:class:`Cluster`).
        on_bad: called with each bad line (left out).
        on_bytes: called with the bytes of each line read (for a progress bar).
        warn: called with each warning (a guess of ``--format auto``, a plain-text line in JSONL).
        checkpoint: called after each line read and every quarter of a second while the input has none to
            give (a pipe): it may raise to stop the run (the CLI's SIGTERM), which then cleans up.

    Returns:
        What it did.

    Raises:
        ConfigError: ``keep`` or ``fmt`` unknown, or the input is one JSON array (not a line each).
        RedisUnavailableError: the private Redis did not start.
    """
    started = time.monotonic()
    if fmt not in FORMATS:
        raise ConfigError(f"format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if keep not in KEEPS:
        raise ConfigError(f"keep must be one of {', '.join(KEEPS)}, not {keep!r}")
    name = name or (source.name if isinstance(source, Path) else "stdin")
    prefix = id_prefix if id_prefix is not None else f"{name}:"
    docs = _Documents(with_ids=clusters is not None)
    bad = 0

    def report(line: BadLine) -> None:
        nonlocal bad
        bad += 1
        if on_bad is not None:
            on_bad(line)

    with private_redis() as server, contextlib.ExitStack() as files:
        private = settings.model_copy(
            update={
                "redis_url": server.url,
                "redis_cluster": False,
                "data_dir": server.workdir,
                "baskets": "none",
            }
        )
        stream = files.enter_context(source.open("rb")) if isinstance(source, Path) else source
        start = rereadable_from(stream)
        copy = server.workdir / "input"
        with contextlib.ExitStack() as stack:
            engine = stack.enter_context(InProcessEngine(connect(private, retry_for_s=5), private))
            spool = None if start is not None else stack.enter_context(copy.open("wb"))
            lines = _read(stream, spool, on_bytes, checkpoint)
            _index(engine, _documents(lines, fmt, prefix, name, private, report, warn), docs, report)
            labels = engine.clusters()
        log.info(
            "%s indexed and their final clusters read in %.1f s; %s",
            _count(engine.added, "document"),
            time.monotonic() - started,
            "writing the lines to keep from a second pass over the input"
            if start is not None
            else "writing the lines to keep from the copy of the input (it is not a regular file)",
        )
        lengths = np.frombuffer(docs.lengths, dtype=np.int64) if docs.lengths else np.zeros(0, np.int64)
        kept = kept_documents(labels, lengths, keep)
        line_nos = np.frombuffer(docs.lines, dtype=np.int64) if docs.lines else np.zeros(0, np.int64)
        if start is not None:
            stream.seek(start)
            again = stream
        else:
            again = files.enter_context(copy.open("rb"))
        _write_lines(again, line_nos[kept], output)
    found = 0
    if docs.ids is not None and clusters is not None:
        for cluster in clusters_of(labels, kept, docs.ids):
            clusters.write(cluster.to_json() + "\n")
            found += 1
    else:
        valid = labels[labels >= 0]
        found = int(np.count_nonzero(np.bincount(valid, minlength=labels.size) >= 2)) if valid.size else 0
    n = int(np.count_nonzero(labels >= 0))
    return Summary(n, int(kept.size), found, bad, time.monotonic() - started)


def _read(
    stream: BinaryIO,
    spool: BinaryIO | None,
    on_bytes: Callable[[int], None] | None,
    checkpoint: Callable[[], None] | None = None,
) -> Iterator[bytes]:
    """The lines of ``stream`` (line breaks removed), each copied to ``spool`` when given; ``checkpoint``
    called after each, and every quarter of a second while a pipe has none to give."""
    for line in read_lines(stream, _IDLE_S if checkpoint is not None else None):
        if checkpoint is not None:
            checkpoint()
        if line is None:  # (a pipe with nothing to read for _IDLE_S)
            continue
        if spool is not None:
            spool.write(line + b"\n")
        if on_bytes is not None:
            on_bytes(len(line) + 1)
        yield line


def _documents(
    lines: Iterator[bytes],
    fmt: str,
    prefix: str,
    name: str,
    settings: Settings,
    report: Callable[[BadLine], None],
    warn: Callable[[str], None] | None,
) -> Iterator[tuple[int, str, str]]:
    """(line number, id, text) of each document line, read as ``dedupd push`` reads them (``--format
    auto``: from the first non-blank line, :func:`~dedupd.ops.producer.detect_format`; an input whose
    first line is a JSON object is JSONL, its plain-text lines taken with a warning); bad lines go to
    ``report``, blank ones nowhere."""
    text_lines: PlainTextLines | None = None
    looked = fmt != "auto"  # whether --format auto looked at the first non-blank line
    for no, raw in enumerate(lines, start=1):
        if not looked and raw.strip():
            looked, fmt = True, _detected(raw, name, warn)
            text_lines = PlainTextLines(name, warn) if fmt == JSONL_AUTO else None
        item = parse_line(raw, no, fmt, prefix, max_id_bytes=settings.max_id_bytes)
        if item is None:
            continue
        problem = item if isinstance(item, BadLine) else _refusal(item, no)
        if problem is not None:
            report(problem)
            continue
        assert not isinstance(item, BadLine)
        if text_lines is not None and not raw.lstrip().startswith(b"{"):
            text_lines.taken(no, item["id"])
        yield no, item.get("id") or f"{prefix}{no}", item["text"]
    if text_lines is not None:
        text_lines.finish()


def _detected(first: bytes, name: str, warn: Callable[[str], None] | None) -> str:
    """The format ``--format auto`` reads the input in, from its first non-blank line (a CSV-looking
    header is warned about); an input that opens a JSON array is refused (dedup reads a document a line)."""
    detected = detect_format(first, name)
    if detected.fmt == "json-array":
        raise ConfigError(
            f"{name} starts with '[': dedup reads one document per line (JSONL or text); write the array "
            "as JSONL (jq -c '.[]'), or pass --format text to take its lines as text"
        )
    if detected.warning and warn is not None:
        warn(detected.warning)
    return detected.fmt


def _refusal(fields: dict[str, str], no: int) -> BadLine | None:
    """Why a parsed line is no document to compare, or None (the engine refuses a text over the daemon's
    size bounds itself: :class:`~dedupd.ops.inprocess.Refused`)."""
    op = fields.get("op", "upsert")
    if op.strip().lower() != "upsert":
        return BadLine(
            no, f"op {op!r}: dedup compares documents (upserts) only; drop the op field or the line"
        )
    if "text" not in fields:
        return BadLine(no, "no 'text' field: a JSONL line needs one")
    return None


def _index(
    engine: InProcessEngine,
    documents: Iterator[tuple[int, str, str]],
    docs: _Documents,
    report: Callable[[BadLine], None],
) -> None:
    """Give the documents to the engine in batches of ``batch_size`` (:data:`BATCH_SIZE` unless it is set)
    or ``batch_max_bytes`` of text."""
    s = engine.settings
    size = s.batch_size if "batch_size" in s.model_fields_set else BATCH_SIZE
    texts: list[str] = []
    held = 0

    def flush() -> None:
        nonlocal held
        refuse(engine.add(texts))
        texts.clear()
        held = 0

    def refuse(refused: list[Refused]) -> None:
        for r in refused:
            report(BadLine(docs.lines[r.index], f"{r.code}: {r.detail}"))

    for no, doc_id, text in documents:
        docs.add(no, doc_id, text)
        texts.append(text)
        held += len(text)
        if len(texts) >= size or held >= s.batch_max_bytes:
            flush()
    if texts:
        flush()
    refuse(engine.settle())


def rereadable_from(stream: BinaryIO) -> int | None:
    """Where a second pass over ``stream`` starts (its offset now) when it is a regular file, which reads
    the same bytes again; None for anything else (a pipe, a FIFO, ``/dev/fd/N`` of a process substitution,
    a terminal, a stream without a file descriptor), whose bytes are gone once read. Decided by what the
    open file is, not by its name: standard input redirected from a file is a regular file too.

    >>> import io
    >>> rereadable_from(io.BytesIO(b"no file descriptor")) is None
    True
    """
    try:
        regular = stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
        return stream.tell() if regular else None
    except (OSError, ValueError):  # (io.UnsupportedOperation is both)
        return None


def _write_lines(stream: BinaryIO, line_nos: I64Array, output: BinaryIO) -> None:
    """Write the lines numbered ``line_nos`` (ascending, counted from where ``stream`` is) of ``stream``,
    each as it was, with a line break."""
    if not line_nos.size:
        return
    wanted = iter(line_nos.tolist())
    next_no = next(wanted)
    for no, line in enumerate(read_lines(stream), start=1):
        if no == next_no and line is not None:
            output.write(line + b"\n")
            next_no = next(wanted, 0)
            if not next_no:
                return
