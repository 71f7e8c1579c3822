"""The parameters an index is built with; signatures and bands are only comparable under one spec."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from dedupd.errors import ConfigError, ParameterMismatchError
from dedupd.lsh import LSHParams
from dedupd.minhash import SCHEMES
from dedupd.settings import Settings, ShingleSpec

SCHEME = "v1"  # version of shingle hashing, signature schemes and band hashing


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """Shingling, MinHash and banding parameters, stored with the index."""

    shingle: str
    num_perm: int
    seed: int
    bands: int
    rows: int
    minhash: str = "oph"
    scheme: str = SCHEME

    def __post_init__(self) -> None:
        ShingleSpec.parse(self.shingle)
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
        return cls(settings.shingle, settings.num_perm, settings.seed, lsh.bands, lsh.rows, settings.minhash)

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
            for name in ("shingle", "num_perm", "seed", "bands", "rows", "minhash", "scheme")
            if getattr(stored, name) != getattr(self, name)
        ]
        if diffs:
            raise ParameterMismatchError(
                f"the index under prefix {prefix!r} was built with other parameters:\n  "
                + "\n  ".join(diffs)
                + "\nStart with the index's parameters, or run `dedupd rebuild` to reindex with the new ones."
            )
