"""A duplicate alert: the one type the daemon writes to the alerts stream and readers read back.

:meth:`Alert.fields` writes an alerts-stream entry, :meth:`Alert.from_fields` reads it back, and
:meth:`Alert.to_dict` is what ``dedupd alerts --json`` prints and :meth:`dedupd.Client.alerts` yields. The
stream holds no integer ids of the index, so an alert holds its matches as :class:`~dedupd.similarity.matches.Match`
(id, similarity), as a verdict does: the daemon builds one from its verified matches (``Found``) directly.

An alert written by ``dedupd rebuild --alert-existing`` (a pair of documents indexed before a lower threshold,
alerted when the rebuild switches to it) has one more field, last: ``by`` = ``rebuild``; its ``input`` is the
input entry that last changed the document (its version), not one being processed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import chain
from typing import Any

from dedupd.similarity.matches import Found, Match

BY_REBUILD = (
    "rebuild"  # ``by`` of an alert `dedupd rebuild --alert-existing` wrote (its ``input``: the version)
)
_quoted = json.encoder.encode_basestring_ascii  # a str as json.dumps quotes it (ensure_ascii)


@dataclass(frozen=True, slots=True, init=False)
class Alert:
    """A verified duplicate: the fields of one alerts-stream entry (and, read back, the entry's id).

    >>> a = Alert("b", [Found("a", 0.912345, 1), Found('q"é', 0.8, 2)], "a", "1-0", "exact", None, None)
    >>> a.duplicate_of, a.similarity, a.matches[1]
    ('a', 0.912345, Match(id='q"é', similarity=0.8))
    >>> entry = dict(zip(*[iter(x.encode() for x in a.fields())] * 2))  # as the stream holds it
    >>> Alert.from_fields(b"7-0", entry).to_dict()["matches"]
    [['a', 0.9123], ['q"é', 0.8]]
    """

    doc_id: str
    matches: tuple[Match, ...]  # best first, at least one
    cluster: str
    input: str  # the input entry's id
    verify: str  # "exact" or "signature": what the similarities are
    source: str | None
    meta: str | None  # the input's JSON object, as its text
    entry_id: str | None  # the alerts-stream entry's id: None until written (read back: its id)
    by: str | None  # who wrote it when not a daemon processing ``input``: "rebuild" (BY_REBUILD)

    def __init__(
        self,
        doc_id: str,
        matches: Iterable[Found | Match],
        cluster: str,
        input: str,
        verify: str,
        source: str | None,
        meta: str | None,
        entry_id: str | None = None,
        by: str | None = None,
    ) -> None:
        """``matches`` best first, as ``Found`` (the daemon's verified matches: their integer ids are the
        index's own and are not kept) or as ``Match``; ``by`` for an alert no daemon wrote (BY_REBUILD)."""
        kept = tuple([m if isinstance(m, Match) else Match(m.doc_id, m.similarity) for m in matches])
        init = object.__setattr__  # (frozen)
        init(self, "doc_id", doc_id)
        init(self, "matches", kept)
        init(self, "cluster", cluster)
        init(self, "input", input)
        init(self, "verify", verify)
        init(self, "source", source)
        init(self, "meta", meta)
        init(self, "entry_id", entry_id)
        init(self, "by", by)

    @property
    def duplicate_of(self) -> str:
        """The best match's id."""
        return self.matches[0].id

    @property
    def similarity(self) -> float:
        """The best match's similarity."""
        return self.matches[0].similarity

    def fields(self) -> list[str]:
        """The fields as one flat name/value list (what the alerts stream's entry holds), ``matches`` written
        as ``json.dumps`` writes it (ids quoted and escaped by json's own encoder, similarities rounded).

        >>> a = Alert("b", [Found("a", 0.912345, 1), Found('q"é', 0.8, 2)], "a", "1-0", "exact", None, None)
        >>> a.fields()[6:8] == ["matches", json.dumps([["a", 0.9123], ['q"é', 0.8]])]
        True
        """
        best = self.matches[0]
        matches = ", ".join(f"[{_quoted(m.id)}, {round(m.similarity, 4)!r}]" for m in self.matches)
        out = ["id", self.doc_id, "duplicate_of", best.id, "similarity", f"{best.similarity:.4f}"]
        out += [
            "matches",
            f"[{matches}]",
            "cluster",
            self.cluster,
            "input",
            self.input,
            "verify",
            self.verify,
        ]
        if self.source is not None:
            out += ["source", self.source]
        if self.meta is not None:
            out += ["meta", self.meta]
        if self.by is not None:
            out += ["by", self.by]
        return out

    @classmethod
    def from_fields(cls, entry_id: bytes | str, fields: Mapping[bytes, bytes]) -> Alert:
        """Read an alerts-stream entry back (``fields`` as a client returning bytes reads them); its
        similarities are the stream's (rounded to 4 places).

        Raises:
            ValueError: when the entry is not one :meth:`fields` writes: a field missing, added or out of its
                order, a value not UTF-8 or that does not parse, or one written otherwise (``similarity``
                not the best match's, say), so that :meth:`fields` of the alert read gives the entry back.
        """
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        try:
            f = {k.decode(): v.decode() for k, v in fields.items()}
            matches = tuple(_match(m) for m in json.loads(f["matches"]))
            if not matches:
                raise ValueError("no matches")
            alert = cls(
                f["id"],
                matches,
                f["cluster"],
                f["input"],
                f["verify"],
                f.get("source"),
                f.get("meta"),
                by=f.get("by"),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"alert {eid}: not an alert entry ({exc!r})") from None
        if alert.fields() != list(chain.from_iterable(f.items())):
            raise ValueError(f"alert {eid}: not an alert entry as fields() writes it")
        object.__setattr__(alert, "entry_id", eid)
        return alert

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: ``alert`` (the entry's id), then the entry's fields in their order, with
        ``similarity`` a float, ``matches`` ``[[id, similarity], ...]`` and ``meta`` parsed.

        >>> Alert("b", [Match("a", 0.91)], "a", "1-0", "exact", "wire", '{"k": 1}', "7-0").to_dict()
        ... # doctest: +NORMALIZE_WHITESPACE
        {'alert': '7-0', 'id': 'b', 'duplicate_of': 'a', 'similarity': 0.91, 'matches': [['a', 0.91]],
         'cluster': 'a', 'input': '1-0', 'verify': 'exact', 'source': 'wire', 'meta': {'k': 1}}
        """
        best = self.matches[0]
        out: dict[str, Any] = {
            "alert": self.entry_id,
            "id": self.doc_id,
            "duplicate_of": best.id,
            "similarity": round(best.similarity, 4),
            "matches": [[m.id, round(m.similarity, 4)] for m in self.matches],
            "cluster": self.cluster,
            "input": self.input,
            "verify": self.verify,
        }
        if self.source is not None:
            out["source"] = self.source
        if self.meta is not None:
            out["meta"] = self.meta
            with contextlib.suppress(ValueError):
                out["meta"] = json.loads(self.meta)
        if self.by is not None:
            out["by"] = self.by
        return out


def _match(pair: Any) -> Match:
    """One ``[id, similarity]`` of an entry's ``matches``."""
    doc_id, similarity = pair
    if type(doc_id) is not str or type(similarity) is not float:
        raise TypeError(f"a match is [id, similarity], not {pair!r}")
    return Match(doc_id, similarity)
