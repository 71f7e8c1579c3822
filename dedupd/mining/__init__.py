"""Frequent itemsets and association rules over market baskets (A-Priori, PCY, SON, Toivonen, ...).

The algorithms follow the course material ``seeds/000`` (Lecture 1, "Frequent Itemsets and
Association Rules"). The pure modules here import nothing from Redis; ``redis_source`` is the only
Redis-facing one and ``cli`` holds the ``dedupd mine`` command.
"""

from __future__ import annotations

