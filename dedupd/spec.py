"""The parameters an index is built with; signatures and bands are only comparable under one spec."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass

from dedupd.errors import ConfigError, ParameterMismatchError
from dedupd.lsh import LSHParams
from dedupd.minhash import SCHEMES
from dedupd.settings import Settings, ShingleSpec

SCHEME = "v2"  # version of shingle hashing, signature schemes and band hashing


BUCKETS_PER_HASH = 64  # target bucket count per Redis hash at capacity (listpack encoding holds 128)


def shard_bits_for(capacity: int) -> int:
    """Bits of the band hash that pick a bucket hash: about capacity/64 hashes per band, at most 2**20."""
    return max(0, min(20, math.ceil(math.log2(max(1.0, capacity / BUCKETS_PER_HASH)))))


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """Shingling, MinHash and banding parameters, stored with the index."""

    shingle: str
    num_perm: int
    seed: int
    bands: int
    rows: int
    minhash: str = "oph"
    shard_bits: int = 12
    scheme: str = SCHEME

    def __post_init__(self) -> None:
        ShingleSpec.parse(self.shingle)
        if not 0 <= self.shard_bits <= 20:
            raise ConfigError(f"shard_bits must be between 0 and 20 (got {self.shard_bits})")
        if self.minhash not in SCHEMES:
            raise ConfigError(f"unknown minhash scheme {self.minhash!r}: use one of {', '.join(SCHEMES)}")
        LSHParams(self.bands, self.rows).check(self.num_perm)

    @classmethod
    def from_settings(cls, settings: Settings) -> IndexSpec:
        """The spec the settings ask for (bands x rows chosen from the threshold unless given)."""
        if settings.bands is not None and settings.rows is not None:
            lsh = LSHParams(settings.bands, settings.rows)
        else:
            lsh = LSHParams.choose(settings.threshold, settings.num_perm, settings.fp_weight, settings.fn_weight)
        return cls(settings.shingle, settings.num_perm, settings.seed, lsh.bands, lsh.rows, settings.minhash,
                   shard_bits_for(settings.capacity))

    @property
    def shingle_spec(self) -> ShingleSpec:
        return ShingleSpec.parse(self.shingle)

    @property
    def lsh(self) -> LSHParams:
        return LSHParams(self.bands, self.rows)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> IndexSpec:
        try:
            return cls(**json.loads(text))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"the stored index spec is unreadable ({exc}); run `dedupd rebuild`") from None

    def require_same(self, stored: IndexSpec, prefix: str) -> None:
        """Raise a ParameterMismatchError naming every differing parameter and `dedupd rebuild`."""
        diffs = [
            f"{name}: index has {getattr(stored, name)!r}, settings ask for {getattr(self, name)!r}"
            for name in ("shingle", "num_perm", "seed", "bands", "rows", "minhash", "shard_bits", "scheme")
            if getattr(stored, name) != getattr(self, name)
        ]
        if diffs:
            raise ParameterMismatchError(
                f"the index under prefix {prefix!r} was built with other parameters:\n  "
                + "\n  ".join(diffs)
                + "\nStart with the index's parameters, or run `dedupd rebuild` to reindex with the new ones."
            )
