"""The support threshold: a fraction of the baskets (0 < s < 1) or an absolute count (s >= 1).

Course material ``seeds/000`` ("Frequent Itemsets"): the support of I is the number of baskets
containing all of I, "often as a fraction of total baskets"; I is frequent when its support is at
least s. A fraction s of n baskets means a count of at least ``ceil(s * n)``.

    >>> resolve_support(0.4, 5), resolve_support(2, 5), resolve_support(0.002, 56000)
    (2, 2, 112)
"""

from __future__ import annotations

import math

from dedupd.errors import ConfigError


def resolve_support(support: float, n_baskets: int) -> int:
    """The absolute minimum count for ``support`` over ``n_baskets`` baskets (at least 1).

    Raises:
        ConfigError: when support is not positive, or is >= 1 but not a whole number.
    """
    if not math.isfinite(support) or support <= 0:
        raise ConfigError(f"support must be a fraction 0 < s < 1 or a count >= 1; got {support}")
    if support < 1:
        # tolerate float noise: 0.002 * 56000 is 112.00000000000001
        return max(1, math.ceil(support * n_baskets - 1e-9))
    if support != int(support):
        raise ConfigError(f"support {support} >= 1 is read as a count of baskets and must be a whole number")
    return int(support)


def scaled_count(min_count: int, part: int, whole: int) -> int:
    """Smallest count a part of ``part`` baskets must reach so that no globally frequent itemset
    is missed when every part is checked (SON's pigeonhole): ``ceil(min_count * part / whole)``.

    >>> scaled_count(10, 25, 100)
    3
    """
    if whole <= 0:
        return 1
    return max(1, -(-min_count * part // whole))
