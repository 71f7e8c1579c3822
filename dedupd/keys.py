"""Every Redis key dedupd uses, built in one place under the configurable prefix.

Document ids never appear in key names: each id is mapped to a small integer first, so an id
cannot break a key name whatever it contains. Keys that a script touches together share a hash
tag (``{...}``) so that they live in one Redis Cluster slot.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Keys:
    """Key names for one prefix."""

    prefix: str = "dedupd"

    # --- streams (public contract) ---
    @property
    def docs(self) -> str:
        """Input stream producers XADD to."""
        return f"{self.prefix}:docs"

    @property
    def alerts(self) -> str:
        """Duplicate alerts stream."""
        return f"{self.prefix}:alerts"

    @property
    def dead(self) -> str:
        """Dead-letter stream."""
        return f"{self.prefix}:dead"

    @property
    def baskets(self) -> str:
        """Baskets for the mining module, one entry per processed document."""
        return f"{self.prefix}:baskets"

    def seen(self, stream: str) -> str:
        """Sorted set of input entry ids already emitted to ``stream`` (same slot as the stream)."""
        return f"{{{stream}}}:seen"

    # --- index metadata ---
    @property
    def meta(self) -> str:
        """Hash: the parameters the index was built with, and its generation."""
        return f"{self.prefix}:meta"

    # --- id bookkeeping (one slot) ---
    @property
    def _ids_tag(self) -> str:
        return f"{{{self.prefix}:ids}}"

    @property
    def id_forward(self) -> str:
        """Hash: document id -> integer id."""
        return f"{self._ids_tag}:fwd"

    @property
    def id_seq(self) -> str:
        """Counter for integer ids."""
        return f"{self._ids_tag}:seq"

    @property
    def uf_parent(self) -> str:
        """Hash: integer id -> parent integer id (union-find of duplicate clusters)."""
        return f"{self._ids_tag}:uf"

    # --- per document and per band ---
    def doc(self, num: int, generation: int = 0) -> str:
        """One document's packed record (see record.py) in one index generation."""
        return f"{self.prefix}:doc:{generation}:{num}"

    @property
    def doc_pattern(self) -> str:
        """SCAN pattern matching every document record of every generation."""
        return f"{self.prefix}:doc:*"

    def doc_pattern_of(self, generation: int) -> str:
        """SCAN pattern matching the document records of one generation."""
        return f"{self.prefix}:doc:{generation}:*"

    def buckets(self, generation: int, band: int, shard: int) -> str:
        """Hash of band buckets: field = low 32 bits of the band hash, value = packed uint32 ids.

        The hash tag spreads one band over 16 Redis Cluster slots, so a batch needs few script calls.
        """
        return f"{self.prefix}:b:{generation}:{{{band}.{shard & 15}}}:{shard:x}"

    def band_pattern(self, generation: int) -> str:
        """SCAN pattern matching every bucket hash of one generation."""
        return f"{self.prefix}:b:{generation}:*"

    @property
    def band_pattern_all(self) -> str:
        """SCAN pattern matching every bucket hash of every generation."""
        return f"{self.prefix}:b:*"

    # --- daemon bookkeeping ---
    def heartbeat(self, consumer: str) -> str:
        """Liveness key of one consumer (expires unless refreshed)."""
        return f"{self.prefix}:hb:{consumer}"

    @property
    def heartbeat_pattern(self) -> str:
        return f"{self.prefix}:hb:*"

    @property
    def counters(self) -> str:
        """Hash of running totals (documents, alerts, dead letters)."""
        return f"{self.prefix}:counters"

    @property
    def mined(self) -> str:
        """Latest mining result (JSON) for other consumers."""
        return f"{self.prefix}:mined"
