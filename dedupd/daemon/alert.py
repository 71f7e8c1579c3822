"""A duplicate alert: the fields of one entry of the alerts stream."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from dedupd.similarity.matches import Found

_quoted = json.encoder.encode_basestring_ascii  # a str as json.dumps quotes it (ensure_ascii)


@dataclass(frozen=True, slots=True)
class Alert:
    """A verified duplicate: the fields of one alerts-stream entry."""

    doc_id: str
    matches: Sequence[Found]  # best first: (id, similarity, integer id)
    cluster: str
    input: str
    verify: str
    source: str | None
    meta: str | None

    def fields(self) -> list[str]:
        """The fields as one flat name/value list (what the alerts stream's entry holds), ``matches`` written
        as ``json.dumps`` writes it (ids quoted and escaped by json's own encoder, similarities rounded).

        >>> a = Alert("b", [("a", 0.912345, 1), ('q"é', 0.8, 2)], "a", "1-0", "exact", None, None)
        >>> a.fields()[6:8] == ["matches", json.dumps([["a", 0.9123], ['q"é', 0.8]])]
        True
        """
        best, sim, _ = self.matches[0]
        matches = ", ".join(f"[{_quoted(m[0])}, {round(m[1], 4)!r}]" for m in self.matches)
        out = ["id", self.doc_id, "duplicate_of", best, "similarity", f"{sim:.4f}", "matches", f"[{matches}]"]
        out += ["cluster", self.cluster, "input", self.input, "verify", self.verify]
        if self.source is not None:
            out += ["source", self.source]
        if self.meta is not None:
            out += ["meta", self.meta]
        return out
