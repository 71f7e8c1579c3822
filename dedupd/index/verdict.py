"""A query's verdict: is this text a near-duplicate of something indexed, and of what.

The same value whether it comes from :meth:`dedupd.Client.query` or from the reply stream of an
``op = query`` entry (:meth:`Verdict.fields` writes it, :meth:`Verdict.from_fields` reads it back).

A query that carries the id of an indexed document is compared with every document but that one (as an
upsert of the id would be); ``indexed`` says so, so that "no match" is not read as "not in the index".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dedupd.similarity.bounds import alert_matches
from dedupd.similarity.matches import Found, Match

if TYPE_CHECKING:
    from dedupd.index.protocol import Gateway

__all__ = ["Match", "Verdict", "cluster_of"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the index says of one text.

    >>> v = Verdict("q1", (Match("a", 0.91), Match("b", 0.85)), "a", "exact", indexed=True)
    >>> v.duplicate, v.duplicate_of, v.similarity, v.indexed
    (True, 'a', 0.91, True)
    >>> Verdict.from_fields({k.encode(): str(x).encode() for k, x in zip(v.fields()[::2], v.fields()[1::2])}) == v
    True
    """

    id: str | None  # the query's id (the entry's ``id`` field), if it had one
    matches: tuple[Match, ...]  # verified matches at or above the threshold, best first
    cluster: str | None  # the cluster it would join (None when it is not a duplicate)
    verify: str  # "exact" or "signature": what the similarities are
    input: str | None = None  # the query's input entry id (stream queries)
    indexed: bool = False  # a document with the query's id is in the index (left out of the comparison)

    @property
    def duplicate(self) -> bool:
        return bool(self.matches)

    @property
    def duplicate_of(self) -> str | None:
        """The best match's id."""
        return self.matches[0].id if self.matches else None

    @property
    def similarity(self) -> float | None:
        """The best match's similarity."""
        return self.matches[0].similarity if self.matches else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the reply stream's fields, typed)."""
        out: dict[str, Any] = {
            "id": self.id,
            "duplicate": self.duplicate,
            "matches": [[m.id, round(m.similarity, 4)] for m in self.matches],
            "verify": self.verify,
            "indexed": self.indexed,
        }
        if self.duplicate:
            out.update(
                duplicate_of=self.duplicate_of,
                similarity=round(self.similarity or 0.0, 4),
                cluster=self.cluster,
            )
        if self.input is not None:
            out["input"] = self.input
        return out

    def fields(self) -> list[str]:
        """The reply-stream entry as field/value pairs (``duplicate`` and ``indexed`` are 1 or 0; matches
        as JSON)."""
        d = self.to_dict()
        d["duplicate"] = 1 if self.duplicate else 0
        d["indexed"] = 1 if self.indexed else 0
        d["matches"] = json.dumps(d["matches"])
        if "similarity" in d:
            d["similarity"] = f"{d['similarity']:.4f}"
        return [str(x) for kv in d.items() if kv[1] is not None for x in kv]

    @classmethod
    def from_fields(cls, fields: Mapping[bytes, bytes]) -> Verdict:
        """Read a reply-stream entry back."""
        f = {k.decode(): v.decode() for k, v in fields.items()}
        matches = tuple(Match(str(m), float(s)) for m, s in json.loads(f.get("matches", "[]")))
        return cls(
            f.get("id"),
            matches,
            f.get("cluster"),
            f.get("verify", ""),
            f.get("input"),
            f.get("indexed") == "1",
        )


def cluster_of(gw: Gateway, hits: Sequence[Sequence[Found]]) -> list[tuple[list[Found], str | None]]:
    """For each list of verified matches (best first), the matches a verdict names (as an alert would:
    bounds.alert_matches) and the cluster a document with them would join (the oldest root among the
    matches' clusters; None for an empty list), read only."""
    roots = iter(gw.roots([m.num for found in hits for m in found], fresh=True))  # named to the user
    known = {m.num: m.doc_id for found in hits for m in found}
    kept: list[list[Found]] = []
    best: list[int] = []
    for found in hits:
        root_of = [next(roots) for _ in found]
        kept.append(alert_matches(found, root_of, gw.bounds.max_matches, gw.bounds.max_clusters))
        best.append(min(root_of, default=0))
    named = iter(gw.cluster_names([b for b in best if b], known))
    return [(k, next(named) if b else None) for k, b in zip(kept, best, strict=True)]
