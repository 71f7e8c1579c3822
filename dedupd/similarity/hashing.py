"""Vectorized 64-bit integer mixing shared by shingling, MinHash and banding (pure numpy, no Redis).

``fmix64`` is MurmurHash3's finalizer: a bijection on 64-bit integers with full avalanche. ``combine``
hashes fixed-length tuples of 64-bit values (k consecutive word hashes, r signature values of a band)
as a multilinear form with odd constants, wrapping modulo 2**64, then finalizes it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

U64 = np.uint64
U64Array = npt.NDArray[np.uint64]

_C1 = U64(0xFF51AFD7ED558CCD)
_C2 = U64(0xC4CEB9FE1A85EC53)
_S33 = U64(33)

# Odd multipliers for the positions of a tuple (enough for k or r up to 1024).
_rng = np.random.Generator(np.random.PCG64(0x5EED_D00D))
POSITION_MULTIPLIERS: U64Array = _rng.integers(0, 2**63, size=1024, dtype=np.uint64) * U64(2) + U64(1)
del _rng


def fmix64(h: U64Array, out: U64Array | None = None) -> U64Array:
    """MurmurHash3 fmix64 applied element-wise (wrapping uint64 arithmetic).

    Args:
        h: uint64 array.
        out: optional output array (may be ``h`` itself).

    Returns:
        The mixed values.
    """
    if out is None:
        out = h.copy()
    elif out is not h:
        np.copyto(out, h)
    out ^= out >> _S33
    out *= _C1
    out ^= out >> _S33
    out *= _C2
    out ^= out >> _S33
    return out


def combine(columns: U64Array, salt: int = 0) -> U64Array:
    """Hash each row of a 2-D uint64 array to one uint64.

    Args:
        columns: shape (n, width) uint64.
        salt: mixed in so that different uses (e.g. bands) never collide by construction.

    Returns:
        shape (n,) uint64.
    """
    n, width = columns.shape
    acc = np.full(n, U64(salt) * _C2 + U64(width), dtype=np.uint64)
    for j in range(width):
        acc += columns[:, j] * POSITION_MULTIPLIERS[j]
    return fmix64(acc, out=acc)
