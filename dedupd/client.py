"""The Python API: a typed client for producers and consumers of one dedupd index.

A program needs neither the CLI nor raw stream fields: :meth:`Client.push` and friends write the input
stream, :meth:`Client.query` asks the live index whether a text is a near-duplicate without inserting it
(no daemon needed), :meth:`Client.cluster` lists the members of a document's cluster a page at a time,
:meth:`Client.signature` gives a text's MinHash signature under the index's own
parameters, and :meth:`Client.alerts` / :meth:`Client.dead_letters` iterate over the output streams.

>>> from dedupd import Client
>>> with Client.connect(redis_url, prefix="apidoc") as client:
...     entry = client.push("a", "the quick brown fox jumps over the lazy dog")
...     client.query("the quick brown fox jumps over the lazy dog").duplicate  # no daemon ran yet
False
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt

from dedupd.daemon.entries import (
    BAD_REPLY_TO,
    BAD_UTF8,
    MISSING_TEXT,
    REPLY_TO_RE,
    UNKNOWN_OP,
    Op,
    check_id,
    unsendable,
)
from dedupd.errors import DocumentError, InputError
from dedupd.index.cluster_page import DEFAULT_LIMIT, ClusterPage, NotIndexedError, checked_args
from dedupd.index.gateway import RedisGateway
from dedupd.index.generations import Generations
from dedupd.index.keys import Keys
from dedupd.index.matching import verify_reads
from dedupd.index.near_miss import near_misses
from dedupd.index.verdict import Match, Verdict, cluster_of
from dedupd.ops.alerts import decode_alert
from dedupd.server.connection import RedisClient, connect
from dedupd.settings import Settings, load_settings
from dedupd.similarity.spec import IndexSpec

_OPS = {op.value for op in Op}


class Client:
    """A connection to one dedupd index (one Redis, one key prefix)."""

    def __init__(self, redis: RedisClient, settings: Settings) -> None:
        """Wrap an open Redis client (returning bytes); most programs use :meth:`connect` instead."""
        self.redis = redis
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self._generations = Generations(redis, self.keys)
        self._gateway: RedisGateway | None = None

    # ----- connecting -----
    @classmethod
    def connect(cls, url: str | None = None, *, prefix: str = "dedupd", **settings: Any) -> Client:
        """Connect to the index under ``prefix`` at ``url``.

        Args:
            url: ``redis://``, ``rediss://`` or ``unix://`` URL; None for the embedded Redis of
                ``dedupd serve`` (started if none runs; this process keeps it running until it exits).
            prefix: the key prefix of the index.
            settings: any other setting by name (``DEDUPD_*`` variables and the TOML file apply too).

        Returns:
            The client; close it with :meth:`close` or use it as a context manager.

        Raises:
            ConfigError: on an invalid setting. RedisUnavailableError: when Redis does not answer.

        >>> Client.connect(redis_url, prefix="apidoc").keys.docs
        'apidoc:docs'
        """
        return cls.from_settings(load_settings(redis_url=url, prefix=prefix, **settings))

    @classmethod
    def from_settings(cls, settings: Settings) -> Client:
        """Connect as ``settings`` say (``redis_url``, ``prefix``, ...).

        >>> from dedupd.settings import load_settings
        >>> Client.from_settings(load_settings(redis_url=redis_url)).keys.prefix
        'dedupd'
        """
        return cls(connect(settings), settings)

    def close(self) -> None:
        """Close the connection."""
        self.redis.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # ----- producing -----
    def push(
        self,
        doc_id: str,
        text: str | None = None,
        *,
        op: str = "upsert",
        source: str | None = None,
        items: Iterable[str] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> str:
        """Add one entry to the input stream; returns its stream id.

        Args:
            doc_id: the document's id.
            text: its text (needed by upsert, append and query).
            op: ``upsert`` (default), ``append``, ``delete`` or ``query``.
            source: where it came from (carried into alerts).
            items: an explicit basket for ``dedupd mine``.
            meta: a JSON object passed through to the alert.

        Raises:
            DocumentError: on an unknown op, an empty id, a missing text, an id longer than the settings'
                ``max_id_bytes`` or a field UTF-8 cannot carry (a lone surrogate such as ``"\\ud800"``):
                what a daemon would dead-letter, checked by the daemon's own rules (``code`` is the
                dead-letter code, e.g. ``id_too_long``). The message names the field, and nothing is
                written. (An InputError, and a ConfigError as before.)

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     c.push("x" * 300, "an id longer than max_id_bytes = 256")
        Traceback (most recent call last):
        dedupd.errors.DocumentError: field 'id' has 300 bytes, more than max_id_bytes = 256

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     c.push("b", "some text", source="feed-a").count("-")
        1
        """
        return self._xadd([_fields(_document(doc_id, text, op, source, items, meta), self.settings)])[0]

    def push_many(self, documents: Iterable[Mapping[str, Any]]) -> list[str]:
        """Add entries (mappings with the stream fields ``id``, ``text``, ``op``, ``source``, ``items``,
        ``meta``) in one round trip per 500; returns their stream ids.

        All or nothing for bad documents: every document is checked as :meth:`push` checks one before
        anything is sent, and one that fails raises DocumentError (``document N: ...``, naming the field)
        with nothing of the call written. So ``documents`` is read to its end first: to stream a very large
        input, call push_many per slice of it. (A Redis error part way can still leave the entries of the
        round trips before it written.)

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     len(c.push_many([{"id": "c", "text": "one"}, {"id": "c", "op": "delete"}]))
        2
        """
        batch: list[dict[str, str]] = []
        for n, doc in enumerate(documents, start=1):
            try:
                batch.append(_fields(doc, self.settings))
            except DocumentError as exc:
                raise DocumentError(exc.code, f"document {n}: {exc.detail}") from None
        out: list[str] = []
        for start in range(0, len(batch), 500):
            out += self._xadd(batch[start : start + 500])
        return out

    def append(self, doc_id: str, text: str, **fields: Any) -> str:
        """Extend a document: it becomes ``old + "\\n" + text`` (see :meth:`push`).

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     c.append("b", "and more").count("-")
        1
        """
        return self.push(doc_id, text, op="append", **fields)

    def delete(self, doc_id: str) -> str:
        """Remove a document from the index (see :meth:`push`; an id the daemon would refuse raises
        DocumentError).

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     c.delete("b").count("-")
        1
        """
        return self.push(doc_id, op="delete")

    def _xadd(self, batch: list[dict[str, str]]) -> list[str]:
        pipe = self.redis.pipeline(transaction=False)
        for fields in batch:
            pipe.xadd(self.keys.docs, fields)  # type: ignore[arg-type]
        return [x.decode() if isinstance(x, bytes) else str(x) for x in pipe.execute()]

    # ----- asking -----
    def query(self, text: str, doc_id: str | None = None) -> Verdict:
        """Is ``text`` a near-duplicate of something indexed? Reads the live index; inserts nothing.

        The matches are the ones an upsert of the same text would alert (same candidates, same verification,
        same threshold). No daemon is needed; with no index yet, nothing is a duplicate. With the id of an
        indexed document, that document is left out of the comparison (as an upsert of the id would
        replace it), and the verdict's ``indexed`` says it is there.

        Args:
            text: the text to compare.
            doc_id: an id to carry into the verdict (optional).

        Returns:
            The verdict: ``duplicate``, ``matches`` (best first), ``duplicate_of``, ``similarity``, ``cluster``,
            ``indexed`` (a document with ``doc_id`` is in the index).

        Raises:
            DocumentError: a ``doc_id`` the daemon would refuse (empty, not UTF-8, longer than
                ``max_id_bytes``), as :meth:`push` does.

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     c.query("nothing like it was indexed", doc_id="q").to_dict()["duplicate"]
        False
        """
        return self.query_many([text], [doc_id])[0]

    def query_many(self, texts: list[str], doc_ids: list[str | None] | None = None) -> list[Verdict]:
        """:meth:`query` for many texts in a few round trips.

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     [v.duplicate for v in c.query_many(["one text", "another"], ["q1", "q2"])]
        [False, False]
        """
        ids = doc_ids or [None] * len(texts)
        for doc_id in ids:
            if doc_id is not None:
                _check_id(doc_id, self.settings)
        gw = self._serving()
        if gw is None:
            return [Verdict(i, (), None, self.settings.verify) for i in ids]
        fps = gw.fingerprinter.compute(texts)
        live = [i for i, fp in enumerate(fps) if not fp.empty]
        bands = gw.fingerprinter.band_hashes([fps[i] for i in live])
        nums = gw.nums_of([i or "" for i in ids])  # an indexed document's id: compared as its upsert
        reads = gw.peek(list(bands))
        own = {-(i + 1): (ids[i] or "", fps[i]) for i in live}
        read = {-(i + 1): (reads[k], nums[i]) for k, i in enumerate(live)}
        got = verify_reads(gw, own, read)
        got.add(near_misses(gw, own, got, {k: num for k, (_, num) in read.items()}))
        matched = got.matches
        hits = [matched.get(-(i + 1), []) for i in range(len(texts))]
        indexed = _indexed(gw, nums)
        return [
            Verdict(i, tuple(Match(m.doc_id, m.similarity) for m in kept), cluster, gw.spec.verify, None, x)
            for i, (kept, cluster), x in zip(ids, cluster_of(gw, hits), indexed, strict=True)
        ]

    def cluster(self, doc_id: str, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None) -> ClusterPage:
        """The members of ``doc_id``'s duplicate cluster, a page at a time (read only; a document without
        near-duplicates is a cluster of one).

        Args:
            doc_id: an indexed document's id.
            limit: the most members in the page (1 to 1,000); the work of a call is bounded by it.
            cursor: the ``next`` of the page before (None: the first page).

        Returns:
            The page: ``cluster`` (its name, as alerts show it), ``members`` (the document itself first on
            the first page), ``next`` (None on the last page), ``complete`` (False for a cluster that began
            before dedupd kept members, in an index made by an earlier version, unless the page lists it
            all and shows that none is missing: some may be missing).

        Raises:
            NotIndexedError: the document is not in the index (or there is no index yet). CursorError: the
                member the page before stopped at was deleted meanwhile (list again). ConfigError: a limit
                or cursor out of range.

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     c.cluster("never-pushed")
        Traceback (most recent call last):
        dedupd.index.cluster_page.NotIndexedError: 'never-pushed' is not in the index...
        """
        checked_args(limit, cursor)  # a bad argument is said first, index or not
        gw = self._serving()
        if gw is None:
            raise NotIndexedError(
                f"{doc_id!r} is not in the index: there is no index under the prefix {self.keys.prefix!r} yet "
                "(start `dedupd serve` and push documents)"
            )
        return gw.cluster_page(doc_id, cursor, limit)

    def signature(self, text: str) -> npt.NDArray[np.uint32]:
        """The MinHash signature of ``text`` under the index's parameters (the settings' before any index).

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     sig = c.signature("a rose is a rose is a rose")
        >>> sig.dtype.name, sig.shape
        ('uint32', (128,))
        """
        gw = self._serving()
        spec = gw.spec if gw is not None else self.settings.index_spec()
        fpr = (
            gw.fingerprinter if gw is not None else RedisGateway(self.redis, self.keys, spec, 0).fingerprinter
        )
        return np.asarray(fpr.compute([text])[0].signature, dtype=np.uint32)

    def index_spec(self) -> IndexSpec | None:
        """The parameters the index was built with, or None before the first daemon created it.

        >>> with Client.connect(redis_url, prefix="apidoc-empty") as c:
        ...     print(c.index_spec())
        None
        """
        state = self._generations.read()
        return state.spec if state is not None else None

    def _serving(self) -> RedisGateway | None:
        """The serving generation's gateway (followed across rebuilds), or None when there is no index."""
        poll = self._generations.poll()
        if poll.spec is None:
            return None
        if self._gateway is None or (self._gateway.generation, self._gateway.spec) != (poll.gen, poll.spec):
            self._gateway = RedisGateway(
                self.redis, self.keys, poll.spec, poll.gen, serving=False, bounds=self.settings.bounds()
            )
        return self._gateway

    # ----- consuming -----
    def alerts(
        self, since: str = "0-0", *, follow: bool = False, block_ms: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """Duplicate alerts after the stream id ``since`` (``"0-0"``: all kept, ``"now"``: only new ones), as
        dicts (``Alert.to_dict`` of :mod:`dedupd.daemon.alert`: ``matches`` and ``meta`` parsed). With
        ``follow``, waits for new ones (at most ``block_ms`` at a time) and never ends; else stops at the
        newest.

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     list(c.alerts())
        []
        """
        return self._read(self.keys.alerts, since, follow, block_ms)

    def dead_letters(
        self, since: str = "0-0", *, follow: bool = False, block_ms: int = 1000
    ) -> Iterator[dict[str, Any]]:
        """Dead letters (the original fields plus ``error``, ``detail``, ``input``), as :meth:`alerts` does.

        >>> with Client.connect(redis_url, prefix="apidoc") as c:
        ...     list(c.dead_letters(since="now"))
        []
        """
        return self._read(self.keys.dead, since, follow, block_ms)

    def _read(self, stream: str, since: str, follow: bool, block_ms: int) -> Iterator[dict[str, Any]]:
        cursor = _since(self.redis, stream, since)
        while True:
            page: Any = self.redis.xrange(stream, min=f"({cursor}", count=500)
            for entry_id, fields in page:
                yield decode_alert(entry_id, fields)
            if page:
                cursor = page[-1][0].decode()
                continue
            if not follow:
                return
            self.redis.xread({stream: cursor}, count=1, block=block_ms)


def _indexed(gw: RedisGateway, nums: list[int]) -> list[bool]:
    """Whether each integer id (0: an id the index does not know) has a record in the serving generation:
    a document indexed under that id (an id a delete left behind has none)."""
    known = [n for n in nums if n > 0]
    versions = gw.versions(known) if known else {}
    return [bool(versions.get(n)) for n in nums]


def _since(redis: RedisClient, stream: str, since: str) -> str:
    if since in ("now", "$"):
        last: Any = redis.xrevrange(stream, count=1)
        return last[0][0].decode() if last else "0-0"
    if since in ("-", "0", ""):
        return "0-0"
    return since


def _document(
    doc_id: str,
    text: str | None,
    op: str,
    source: str | None,
    items: Iterable[str] | None,
    meta: Mapping[str, Any] | None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"id": doc_id, "op": op}
    for name, value in (("text", text), ("source", source), ("items", items), ("meta", meta)):
        if value is not None:
            doc[name] = value
    return doc


def _check_id(doc_id: str, settings: Settings) -> None:
    """Refuse an id the daemon would dead-letter (:func:`dedupd.daemon.entries.check_id`: not empty, UTF-8,
    at most the settings' ``max_id_bytes``) or that Redis cannot carry."""
    try:
        check_id(doc_id, settings.max_id_bytes)
    except InputError as exc:
        raise DocumentError(exc.code, exc.detail) from None


def _fields(doc: Mapping[str, Any], settings: Settings) -> dict[str, str]:
    """Stream fields of one document, checked like the daemon would (an error here loses nothing), and
    that Redis can be sent (no lone surrogate: :func:`dedupd.daemon.entries.unsendable`)."""
    op = str(doc.get("op", "upsert"))
    if op not in _OPS:
        raise DocumentError(UNKNOWN_OP, f"op {op!r} is not one of {', '.join(sorted(_OPS))}")
    doc_id = doc.get("id")
    _check_id("" if doc_id is None else str(doc_id), settings)
    if op != "delete" and doc.get("text") is None:
        raise DocumentError(MISSING_TEXT, f"op {op!r} needs a 'text'")
    if op == "query" and not REPLY_TO_RE.match(str(doc.get("reply_to", ""))):
        raise DocumentError(
            BAD_REPLY_TO,
            "op 'query' needs a 'reply_to' of 1-64 letters, digits, '_' or '-' (or use Client.query)",
        )
    out: dict[str, str] = {}
    for name, value in doc.items():
        if value is None:
            continue
        if name == "items":
            out[name] = json.dumps(list(value), ensure_ascii=False)
        elif name == "meta":
            out[name] = json.dumps(dict(value), ensure_ascii=False)
        else:
            out[name] = str(value)
    problem = unsendable(out)
    if problem is not None:
        raise DocumentError(BAD_UTF8, problem)
    return out
