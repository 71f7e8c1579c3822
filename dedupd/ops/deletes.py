"""Deleting documents through the input stream, as any producer does (``dedupd delete``): each id becomes an
``op = delete`` entry, checked as the daemons check one, read from the command line or one id per line.

>>> delete_entry("doc-1", 8, 0)
{'id': 'doc-1', 'op': 'delete'}
>>> delete_entry("a-much-too-long-id", 8, 3)
BadLine(line_no=3, reason="field 'id' has 18 bytes, more than max_id_bytes = 8", where=None)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

from dedupd.daemon.entries import check_id
from dedupd.errors import InputError
from dedupd.ops.producer import BadLine, Item, read_lines

_BOM = b"\xef\xbb\xbf"  # a UTF-8 byte order mark (an editor's, before the first line)


def delete_entry(doc_id: str, max_id_bytes: int, no: int = 0) -> Item:
    """The stream fields that delete ``doc_id``, or a BadLine (line ``no``) saying why the daemon would refuse
    its id (:func:`dedupd.daemon.entries.check_id`: empty, longer than ``max_id_bytes``, not UTF-8)."""
    try:
        return {"id": check_id(doc_id, max_id_bytes), "op": "delete"}
    except InputError as exc:
        return BadLine(no, exc.detail)


def id_lines(stream: BinaryIO, max_id_bytes: int, idle_s: float | None = None) -> Iterator[Item | None]:
    """The delete entries of ``stream``, one id per line as it arrives: the whole line is the id (its line
    break, ``\\n`` or ``\\r\\n``, removed; a UTF-8 byte order mark before the first removed); blank lines are
    skipped; a line that is not UTF-8 or no acceptable id is a BadLine. None whenever the input paused for
    ``idle_s`` (pipes and terminals: time to send what is buffered)."""
    no = 0
    for raw in read_lines(stream, idle_s):
        if raw is None:
            yield None
            continue
        no += 1
        line = raw.removesuffix(b"\r")
        if no == 1:
            line = line.removeprefix(_BOM)
        if not line.strip():
            continue
        try:
            doc_id = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield BadLine(no, f"not UTF-8 (byte 0x{line[exc.start]:02x} at byte {exc.start + 1} of the line)")
            continue
        yield delete_entry(doc_id, max_id_bytes, no)
