"""dedupd: streaming near-duplicate detection on Redis (shingling, MinHash, LSH), plus itemset mining."""

from __future__ import annotations

__version__ = "0.1.0"
