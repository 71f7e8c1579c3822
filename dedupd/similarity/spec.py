"""The parameters an index is built with (pure): signatures, bands and verdicts are only comparable under one spec.

The spec is stored with the index (the meta hash) and holds every parameter that shapes its answers:
shingling, MinHash length, seed and scheme, banding, bucket sizing, the threshold and the verification,
and the version of the text normalisation (:mod:`dedupd.similarity.normalization`). A daemon started with
other values refuses with the flags that would match; ``dedupd rebuild`` changes the ones it is given and
keeps the others (:meth:`IndexSpec.with_changes`), but for the normalisation: it always moves to this
version's.

>>> spec = IndexSpec("word:2", 64, 1, 16, 4)
>>> spec.with_changes({"num_perm": 32, "bands": 8}).shingle
'word:2'
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Literal

from dedupd.errors import ConfigError, ParameterMismatchError
from dedupd.similarity.lsh import LSHParams
from dedupd.similarity.minhash import SCHEMES
from dedupd.similarity.normalization import CHANGES, NORMALIZATION, UNVERSIONED

SCHEME = "v2"  # version of shingle hashing, signature schemes and band hashing
VERIFY_MODES = ("signature", "exact")
BUCKETS_PER_HASH = 64  # target bucket count per Redis hash at capacity (listpack encoding holds 128)
SHINGLE_RE = re.compile(r"^(word|char):([1-9][0-9]?)$")


@dataclass(frozen=True, slots=True)
class ShingleSpec:
    """How documents are cut into shingles: ``word:K`` or ``char:K``."""

    unit: Literal["word", "char"]
    k: int

    @classmethod
    def parse(cls, text: str) -> ShingleSpec:
        """Parse ``word:3`` / ``char:5``.

        Raises:
            ConfigError: when the text is not of that form.
        """
        m = SHINGLE_RE.match(text.strip())
        if not m:
            raise ConfigError(
                f"shingle must look like 'word:3' or 'char:5' (unit word|char, k from 1 to 99); got {text!r}"
            )
        return cls(m.group(1), int(m.group(2)))  # type: ignore[arg-type]

    def __str__(self) -> str:
        return f"{self.unit}:{self.k}"


def shard_bits_for(capacity: int) -> int:
    """Bits of the band hash that pick a bucket hash: about capacity/64 hashes per band, at most 2**20."""
    return max(0, min(20, math.ceil(math.log2(max(1.0, capacity / BUCKETS_PER_HASH)))))


# How a user sets each parameter: the flag of `dedupd serve`/`dedupd rebuild` and the variable.
_HOW: dict[str, tuple[str, str]] = {
    "shingle": ("--shingle", "DEDUPD_SHINGLE"),
    "num_perm": ("--num-perm", "DEDUPD_NUM_PERM"),
    "seed": ("--seed", "DEDUPD_SEED"),
    "bands": ("--bands", "DEDUPD_BANDS"),
    "rows": ("--rows", "DEDUPD_ROWS"),
    "minhash": ("--minhash", "DEDUPD_MINHASH"),
    "shard_bits": ("--capacity", "DEDUPD_CAPACITY"),
    "threshold": ("--threshold", "DEDUPD_THRESHOLD"),
    "verify": ("--verify", "DEDUPD_VERIFY"),
    "retention_s": ("--retention-s", "DEDUPD_RETENTION_S"),
    "max_documents": ("--max-documents", "DEDUPD_MAX_DOCUMENTS"),
    "refresh_on_duplicate": ("--refresh-on-duplicate", "DEDUPD_REFRESH_ON_DUPLICATE"),
}


def _mismatch(name: str, old: Any, new: Any) -> str:
    """One line of :meth:`IndexSpec.require_same`: what the index has, what is asked, and how it is set.

    >>> _mismatch("num_perm", 128, 64)
    'num_perm: index has 128, settings ask for 64 (DEDUPD_NUM_PERM)'
    >>> _mismatch("normalization", 1, 2)  # doctest: +ELLIPSIS
    "normalization: the index's texts were normalised by version 1, this dedupd normalises by version 2 (it drops ...)"
    """
    if name == "normalization":
        change = f" ({CHANGES[new]})" if new in CHANGES else ""
        return (
            f"normalization: the index's texts were normalised by version {old}, this dedupd normalises by "
            f"version {new}{change}"
        )
    return f"{name}: index has {old!r}, settings ask for {new!r} ({_HOW.get(name, ('', 'a code change'))[1]})"


@dataclass(frozen=True, slots=True)
class IndexSpec:
    """Every parameter that shapes the index's answers, stored with it."""

    shingle: str
    num_perm: int
    seed: int
    bands: int
    rows: int
    minhash: str = "oph"
    shard_bits: int = 12
    scheme: str = SCHEME
    threshold: float = 0.8
    verify: str = "exact"
    normalization: int = NORMALIZATION  # the text normalisation's version (a stored spec without it: 1)
    # the retention window (index/retention.py): by age and by count, None = no bound; whether a match
    # restarts the matched document's age (a stored spec without them: no window)
    retention_s: int | None = None
    max_documents: int | None = None
    refresh_on_duplicate: bool = True

    def __post_init__(self) -> None:
        ShingleSpec.parse(self.shingle)
        if not 0 <= self.shard_bits <= 20:
            raise ConfigError(f"shard_bits must be between 0 and 20 (got {self.shard_bits})")
        if self.minhash not in SCHEMES:
            raise ConfigError(f"unknown minhash scheme {self.minhash!r}: use one of {', '.join(SCHEMES)}")
        if not 0.0 < self.threshold < 1.0:
            raise ConfigError(f"threshold must be between 0 and 1, exclusive (got {self.threshold})")
        if self.verify not in VERIFY_MODES:
            raise ConfigError(f"verify must be one of {', '.join(VERIFY_MODES)} (got {self.verify!r})")
        if not isinstance(self.normalization, int) or self.normalization < 1:
            raise ConfigError(f"normalization must be a version number (got {self.normalization!r})")
        LSHParams(self.bands, self.rows).check(self.num_perm)
        for name in ("retention_s", "max_documents"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(
                    f"{name} must be a positive whole number, or unset for no bound (got {value!r})"
                )

    @property
    def windowed(self) -> bool:
        """Whether documents expire (a retention window by age or count is set)."""
        return self.retention_s is not None or self.max_documents is not None

    @property
    def shingle_spec(self) -> ShingleSpec:
        return ShingleSpec.parse(self.shingle)

    @property
    def lsh(self) -> LSHParams:
        return LSHParams(self.bands, self.rows)

    @property
    def store_shingles(self) -> bool:
        """Whether records keep the shingle fingerprints (exact verification needs them)."""
        return self.verify == "exact"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> IndexSpec:
        """Read a stored spec (one stored before threshold and verify were part of it gets the defaults; one
        stored before the normalisation's version was, the first version: its texts were normalised so).

        >>> old = '{"shingle": "word:3", "num_perm": 8, "seed": 1, "bands": 2, "rows": 4}'
        >>> IndexSpec.from_json(old).normalization
        1
        >>> IndexSpec.from_json(IndexSpec("word:3", 8, 1, 2, 4).to_json()).normalization
        2

        Raises:
            ConfigError: when the text is not a spec.
        """
        try:
            stored = json.loads(text)
            if isinstance(stored, dict):
                stored.setdefault("normalization", UNVERSIONED)
            return cls(**stored)
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"the stored index spec is unreadable ({exc}); run `dedupd rebuild`") from None

    @staticmethod
    def lacks_verdict(text: str | bytes) -> bool:
        """Whether a stored spec predates threshold and verify being stored (the opener adopts its own)."""
        stored = json.loads(text)
        return "threshold" not in stored or "verify" not in stored

    def with_changes(self, changes: dict[str, Any]) -> IndexSpec:
        """This spec with only ``changes`` applied (unknown names are refused).

        Raises:
            ConfigError: on a name that is not a spec parameter, or a value that makes the spec invalid.
        """
        names = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ConfigError(f"not index parameters: {', '.join(unknown)}")
        return replace(self, **changes)

    def differences(self, other: IndexSpec) -> list[tuple[str, Any, Any]]:
        """(name, this value, the other's value) for every parameter that differs."""
        return [
            (f.name, getattr(self, f.name), getattr(other, f.name))
            for f in fields(self)
            if getattr(self, f.name) != getattr(other, f.name)
        ]

    def describe_changes(self, new: IndexSpec) -> str:
        """``name old -> new`` for what changes, comma-separated."""
        return ", ".join(f"{name} {old} -> {value}" for name, old, value in self.differences(new))

    def flags(self, names: list[str]) -> str:
        """The `dedupd serve` flags that ask for this spec's value of each parameter in ``names``."""
        out = []
        for name in names:
            if name == "shard_bits":
                out.append(f"--capacity {BUCKETS_PER_HASH << self.shard_bits}")
            elif name in ("retention_s", "max_documents"):  # 0 asks for no bound
                out.append(f"{_HOW[name][0]} {getattr(self, name) or 0}")
            elif name == "refresh_on_duplicate":
                out.append(f"--{'' if self.refresh_on_duplicate else 'no-'}refresh-on-duplicate")
            elif name in _HOW:
                out.append(f"{_HOW[name][0]} {getattr(self, name)}")
        return " ".join(out)

    def require_same(self, stored: IndexSpec, prefix: str) -> None:
        """Refuse settings that differ from the stored index.

        Raises:
            ParameterMismatchError: naming every differing parameter, the flags that match the stored
                index (unless its normalisation differs: no flag matches it), and `dedupd rebuild`.
        """
        diffs = stored.differences(self)
        if not diffs:
            return
        lines = [_mismatch(name, old, new) for name, old, new in diffs]
        names = [name for name, _, _ in diffs]
        if "bands" in names or "rows" in names:
            names = [n for n in names if n not in ("bands", "rows")] + ["bands", "rows"]
        # an index normalised otherwise takes a rebuild: no flag makes this dedupd normalise as it was
        matching = "" if "normalization" in names else stored.flags(names)
        wanted = " ".join(["dedupd rebuild", self.flags(names)]).strip()
        start = f"Start with the index's parameters ({matching}), or run" if matching else "Run"
        raise ParameterMismatchError(
            f"the index under prefix {prefix!r} was built with other parameters:\n  "
            + "\n  ".join(lines)
            + f"\n{start} `{wanted}` to reindex with the new ones."
        )
