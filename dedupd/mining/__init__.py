"""Frequent itemsets and association rules over market baskets (A-Priori, PCY, SON, Toivonen, ...).

The algorithms follow the course material ``seeds/000`` (Lecture 1, "Frequent Itemsets and
Association Rules"). The pure modules here import nothing from Redis; ``redis_source`` is the only
Redis-facing one and ``cli`` holds the ``dedupd mine`` command.
"""

from __future__ import annotations

from dedupd.mining.apriori import apriori
from dedupd.mining.baskets import Baskets, load_baskets
from dedupd.mining.pcy import multihash, multistage, pcy
from dedupd.mining.result import MiningResult, PassReport
from dedupd.mining.rules import Rule, generate_rules
from dedupd.mining.sampling import random_sampling
from dedupd.mining.son import son
from dedupd.mining.support import resolve_support
from dedupd.mining.toivonen import toivonen

__all__ = [
    "Baskets",
    "MiningResult",
    "PassReport",
    "Rule",
    "apriori",
    "generate_rules",
    "load_baskets",
    "multihash",
    "multistage",
    "pcy",
    "random_sampling",
    "resolve_support",
    "son",
    "toivonen",
]
