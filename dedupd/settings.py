"""The typed settings object: defaults < TOML file < ``DEDUPD_*`` environment < CLI flags."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from dedupd.errors import ConfigError, ParameterMismatchError
from dedupd.redact import redact_url
from dedupd.similarity.bounds import Bounds
from dedupd.similarity.lsh import DEFAULT_FN_WEIGHT, DEFAULT_FP_WEIGHT, LSHParams
from dedupd.similarity.normalization import NORMALIZATION
from dedupd.similarity.spec import BUCKETS_PER_HASH, IndexSpec, ShingleSpec, shard_bits_for

PREFIX_RE = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")
ENV_PREFIX = "DEDUPD_"
# where a TOML file is looked for when neither --config nor DEDUPD_CONFIG names one, in this order
DISCOVERED_CONFIGS = (Path("dedupd.toml"), Path("/etc/dedupd/dedupd.toml"))


def find_config_file(environ: Mapping[str, str] | None = None) -> Path | None:
    """The TOML settings file to read: ``DEDUPD_CONFIG`` (``--config`` sets it) when given, else
    ``./dedupd.toml``, else ``/etc/dedupd/dedupd.toml``, else none.

    Raises:
        ConfigError: when ``DEDUPD_CONFIG`` names something that is not a file.
    """
    env = os.environ if environ is None else environ
    given = env.get("DEDUPD_CONFIG")
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise ConfigError(f"DEDUPD_CONFIG points at {given!r}, which is not a file")
        return path
    return next((p for p in DISCOVERED_CONFIGS if p.is_file()), None)


def read_config_file(path: Path) -> dict[str, Any]:
    """The settings of a TOML file.

    Raises:
        ConfigError: one line naming the file and, for a syntax error, the line and column.
    """
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 (byte {exc.start + 1})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the settings file {path}: {exc.strerror or exc}") from None


def _close_match(name: str, known: list[str]) -> str | None:
    found = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return found[0] if found else None


def unknown_env_warnings(environ: Mapping[str, str] | None = None) -> list[str]:
    """One warning per ``DEDUPD_*`` environment variable that is no setting (a typo is otherwise
    silently ignored), naming the closest setting's variable when there is one."""
    env = os.environ if environ is None else environ
    known = [name.upper() for name in Settings.model_fields]
    out = []
    for var in sorted(env):
        name = var.upper().removeprefix(ENV_PREFIX)
        if not var.upper().startswith(ENV_PREFIX) or name == "CONFIG" or name in known:
            continue
        close = _close_match(name, known)
        hint = f" (did you mean {ENV_PREFIX}{close}?)" if close else ""
        out.append(f"ignoring the environment variable {var}: there is no such setting{hint}")
    return out


def default_data_dir() -> Path:
    """Where the embedded Redis keeps its data unless ``DEDUPD_DATA_DIR`` says otherwise."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "dedupd"


class Settings(BaseSettings):
    """Every setting of dedupd. See ``config/dedupd.toml`` for the documented defaults."""

    model_config = SettingsConfigDict(env_prefix="DEDUPD_", extra="forbid", validate_default=True)

    # connection
    redis_url: str | None = Field(None, description="redis:// or rediss:// URL; unset = embedded Redis")
    redis_cluster: bool = Field(False, description="talk to a Redis Cluster through the URL's node")
    data_dir: Path = Field(default_factory=default_data_dir, description="embedded Redis data directory")
    prefix: str = Field("dedupd", description="key prefix")

    # similarity
    shingle: str = Field("word:3", description="word:K or char:K")
    num_perm: int = Field(128, ge=8, le=1024, description="MinHash signature length")
    seed: int = Field(1, ge=0, lt=2**32, description="seed of the MinHash hash family")
    minhash: Literal["oph", "classic"] = Field(
        "oph", description="signature scheme: one-permutation hashing with densification, or K permutations"
    )
    threshold: float = Field(0.8, gt=0.0, lt=1.0, description="Jaccard threshold for an alert")
    bands: int | None = Field(None, ge=1, description="explicit number of LSH bands")
    rows: int | None = Field(None, ge=1, description="explicit rows per band")
    fp_weight: float = Field(
        DEFAULT_FP_WEIGHT, ge=0.0, le=1.0, description="weight of false positives when choosing bands"
    )
    fn_weight: float = Field(
        DEFAULT_FN_WEIGHT, ge=0.0, le=1.0, description="weight of false negatives when choosing bands"
    )
    capacity: int = Field(
        250_000,
        ge=1,
        description="expected number of indexed documents (sizes the band buckets; stored with the index)",
    )
    verify: Literal["signature", "exact"] = Field("exact", description="how LSH candidates are verified")

    # consumer
    batch_size: int = Field(256, ge=1, le=10_000, description="entries per read")
    block_ms: int = Field(1000, ge=1, le=60_000, description="blocking read timeout")
    claim_idle_ms: int = Field(30_000, ge=100, description="idle time before a pending entry is claimed")
    max_deliveries: int = Field(5, ge=1, description="deliveries before an entry is dead-lettered")
    consumer: str | None = Field(None, description="consumer name (default unique per process)")
    overlap_batches: bool = Field(
        True,
        description=(
            "verify a batch and write its alerts while the next one is read and indexed (off: one batch at a"
            " time; always off with wait_replicas or on a Redis Cluster)"
        ),
    )

    # input bounds (a daemon's memory is bounded by these, in bytes, whatever the input)
    max_doc_bytes: int = Field(8_000_000, ge=1, description="largest accepted text, in UTF-8 bytes")
    max_id_bytes: int = Field(256, ge=1, le=4096, description="longest accepted id, in UTF-8 bytes")
    max_entry_bytes: int = Field(
        10_000_000,
        ge=1024,
        description="largest accepted entry: its field names and values together, in bytes",
    )
    max_normalized_bytes: int = Field(
        10_000_000,
        ge=1,
        description=(
            "largest text once normalised (invisible characters dropped, Unicode NFKC), in UTF-8 bytes (bounds"
            " what it expands to)"
        ),
    )
    max_stored_bytes: int = Field(
        8_000_000,
        ge=1024,
        description="largest stored document record, in bytes (an append beyond it is dead-lettered)",
    )
    batch_max_bytes: int = Field(
        32_000_000,
        ge=1024,
        description=(
            "entries a daemon holds at once (a read and the entries waiting), and texts fingerprinted at once"
            " (once normalised), in bytes"
        ),
    )

    # durability on a Redis with replicas (a Redis Cluster: replication is asynchronous)
    wait_replicas: int = Field(
        0,
        ge=0,
        le=16,
        description="replicas that must acknowledge a batch's writes before it is acknowledged",
    )
    wait_timeout_ms: int = Field(
        1000, ge=1, description="how long a batch waits for them (then it is redone)"
    )

    # a cluster's representatives: a document that nearly matches a cluster is checked against them
    representatives: int = Field(
        8,
        ge=0,
        le=64,
        description=(
            "members of each duplicate cluster kept as its representatives, the most often matched"
            " (0: none, no near-miss check)"
        ),
    )
    near_miss_clusters: int = Field(
        4,
        ge=0,
        le=64,
        description=(
            "clusters a document nearly matched (best similarity at least 2 x threshold - 1, none at the"
            " threshold) whose representatives it is also verified against, the nearest first (0: none)"
        ),
    )
    near_miss_members: int = Field(
        1024,
        ge=0,
        le=8192,
        description=(
            "members of each nearly matched cluster a document is also verified against beside its oldest,"
            " the most recently joined first (every member of a cluster of at most this many more; 0: the"
            " representatives and the oldest only)"
        ),
    )

    # bounded work per document (a flood of copies costs what as many different documents cost)
    bucket_members: int = Field(
        64,
        ge=1,
        le=100_000,
        description="members a band bucket takes at most (a full one is read; a document kept out of most of its buckets by full ones takes a place in each)",
    )
    max_candidates: int = Field(
        64, ge=1, le=100_000, description="candidates verified per document at most (every cluster kept)"
    )
    max_matches: int = Field(
        10, ge=1, le=10_000, description="matches an alert names at most (plus the best of each cluster)"
    )
    max_clusters: int = Field(
        128,
        ge=64,
        le=10_000,
        description=(
            "distinct earlier clusters an alert names at most, and a hub looks as deep into its batch"
            " (a hub near many)"
        ),
    )
    candidate_clusters: int = Field(
        1024,
        ge=64,
        le=100_000,
        description=(
            "distinct earlier clusters whose best-ranked candidate a document verifies at most (raised to"
            " max_clusters when below it)"
        ),
    )

    # outputs and retention
    baskets: Literal["items", "words", "sources", "phrases", "none"] = Field(
        "items",
        description=(
            "basket per document: explicit items only; else its distinct words (words); its source and the"
            " ids it duplicates, mined as the sources of each duplicate cluster (sources); its distinct"
            " word 3-grams, for boilerplate (phrases); or none"
        ),
    )
    basket_retention: int = Field(1_000_000, ge=1, description="baskets kept (approximate)")
    alerts_retention: int = Field(1_000_000, ge=1, description="alerts kept (approximate)")
    dead_retention: int = Field(1_000_000, ge=1, description="dead letters kept (approximate)")
    alerts_max_bytes: int = Field(
        256 << 20, ge=4096, description="Redis memory the alerts stream keeps at most (the oldest go first)"
    )
    dead_max_bytes: int = Field(
        256 << 20,
        ge=4096,
        description="Redis memory the dead-letter stream keeps at most (the oldest go first)",
    )
    baskets_max_bytes: int = Field(
        512 << 20, ge=4096, description="Redis memory the baskets stream keeps at most (the oldest go first)"
    )
    dead_letter_max_bytes: int = Field(
        65_536,
        ge=1024,
        description="original fields a dead letter keeps, in bytes (the rest is cut, and it says so)",
    )
    seen_ttl_s: int = Field(
        7 * 86400, ge=60, description="how long redelivery de-duplication remembers an entry"
    )
    seen_prune_s: int = Field(
        60, ge=1, description="how often a daemon forgets redelivery markers older than seen_ttl_s"
    )
    docs_retention_s: int | None = Field(
        None,
        ge=0,
        description="trim acknowledged input entries older than this (None: keep the input stream)",
    )
    heartbeat_ttl_s: int = Field(30, ge=2, description="liveness key TTL")
    reply_maxlen: int = Field(1000, ge=1, description="verdicts kept per reply stream (approximate)")
    reply_ttl_s: int = Field(
        3600, ge=1, description="a reply stream expires after this long without a verdict"
    )
    tombstone_ttl_s: int = Field(
        7 * 86400,
        ge=60,
        description="how long a deleted document's tombstone keeps older entries from reviving it",
    )

    # retention (stored with the index: index/retention.py)
    retention_s: int | None = Field(
        None,
        ge=0,
        description="forget a document this many seconds after it was last touched (its upsert or append, or, "
        "with refresh_on_duplicate, a later document's alert naming it); None or 0: no bound by age",
    )
    max_documents: int | None = Field(
        None,
        ge=0,
        description="keep at most this many documents, the most recently touched; None or 0: no bound by count",
    )
    refresh_on_duplicate: bool = Field(
        True, description="a later document's alert naming a document restarts that document's age"
    )

    # logging
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    log_json: bool = False

    # metrics
    metrics_host: str = Field("127.0.0.1", description="address the Prometheus endpoint listens on")
    metrics_port: int = Field(9464, ge=0, le=65535, description="Prometheus endpoint port; 0 turns it off")

    # not settings: where these came from, for `dedupd stats` and the CLI's warnings
    _config_file: Path | None = PrivateAttr(default=None)
    _warnings: tuple[str, ...] = PrivateAttr(default=())
    _given_at: dict[str, str] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        self._config_file = path = find_config_file()
        self._warnings = tuple(unknown_env_warnings())
        in_env = {k.upper() for k in os.environ}
        in_file = read_config_file(path) if path is not None else {}
        for name in self.model_fields_set:
            if ENV_PREFIX + name.upper() in in_env:
                self._given_at[name] = ENV_PREFIX + name.upper()
            elif path is not None and name in in_file:
                self._given_at[name] = str(path.resolve())
            else:
                self._given_at[name] = f"{name}= given to Settings"

    def given_at(self, name: str) -> str | None:
        """Where the setting ``name`` was given: its flag (``--threshold``), its variable
        (``DEDUPD_THRESHOLD``) or the TOML file's path; None when it was not given (its default)."""
        return self._given_at.get(name)

    @property
    def config_file(self) -> Path | None:
        """The TOML file these settings were read from (None: defaults, environment and flags only)."""
        return self._config_file

    @property
    def warnings(self) -> tuple[str, ...]:
        """Problems that did not stop loading (unknown ``DEDUPD_*`` variables), for the caller to log."""
        return self._warnings

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        path = find_config_file()
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if path is not None:
            read_config_file(path)  # a syntax error: one line with the file name, line and column
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=path))
        return tuple(sources)

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_any_case(cls, v: Any) -> Any:
        if isinstance(v, str):
            v = v.strip().upper()
            return "WARNING" if v == "WARN" else v
        return v

    @field_validator("shingle")
    @classmethod
    def _check_shingle(cls, v: str) -> str:
        try:
            return str(ShingleSpec.parse(v))
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @field_validator("prefix")
    @classmethod
    def _check_prefix(cls, v: str) -> str:
        if not PREFIX_RE.match(v):
            raise ValueError("prefix must be 1-64 characters of letters, digits, '_', '-' or '.'")
        return v

    @field_validator("redis_url")
    @classmethod
    def _check_url(cls, v: str | None) -> str | None:
        if v in (None, ""):
            return None
        if not v.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("redis_url must start with redis://, rediss:// or unix://")
        return v

    @model_validator(mode="after")
    def _check_banding(self) -> Settings:
        if (self.bands is None) != (self.rows is None):
            raise ValueError("set both bands and rows, or neither (then they are chosen from the threshold)")
        if self.bands is not None and self.rows is not None and self.bands * self.rows > self.num_perm:
            raise ValueError(
                f"bands*rows = {self.bands * self.rows} exceeds num_perm = {self.num_perm}; "
                "lower bands or rows, or raise num_perm"
            )
        return self

    @model_validator(mode="after")
    def _check_byte_bounds(self) -> Settings:
        if self.max_entry_bytes > self.batch_max_bytes:
            raise ValueError(
                f"max_entry_bytes ({self.max_entry_bytes}) exceeds batch_max_bytes ({self.batch_max_bytes}): "
                "a batch must hold the largest entry"
            )
        if self.max_normalized_bytes > self.batch_max_bytes:
            raise ValueError(
                f"max_normalized_bytes ({self.max_normalized_bytes}) exceeds batch_max_bytes "
                f"({self.batch_max_bytes}): a batch must hold the largest text"
            )
        if self.max_normalized_bytes < self.max_doc_bytes:
            raise ValueError(
                f"max_normalized_bytes ({self.max_normalized_bytes}) is below max_doc_bytes "
                f"({self.max_doc_bytes}): a text that NFKC leaves as it is must fit"
            )
        return self

    @property
    def shingle_spec(self) -> ShingleSpec:
        return ShingleSpec.parse(self.shingle)

    def bounds(self) -> Bounds:
        """The per-document work bounds (bounds.py)."""
        return Bounds(
            self.bucket_members,
            self.max_candidates,
            self.max_matches,
            self.max_clusters,
            representatives=self.representatives,
            near_miss_clusters=self.near_miss_clusters,
            near_miss_members=self.near_miss_members,
            candidate_clusters=self.candidate_clusters,
        )

    def index_spec(self) -> IndexSpec:
        """The index spec these settings ask for (bands x rows chosen from the threshold unless given)."""
        if self.bands is not None and self.rows is not None:
            lsh = LSHParams(self.bands, self.rows)
        else:
            lsh = LSHParams.choose(self.threshold, self.num_perm, self.fp_weight, self.fn_weight)
        return IndexSpec(
            self.shingle,
            self.num_perm,
            self.seed,
            lsh.bands,
            lsh.rows,
            self.minhash,
            shard_bits_for(self.capacity),
            threshold=self.threshold,
            verify=self.verify,
            retention_s=self.retention_s or None,
            max_documents=self.max_documents or None,
            refresh_on_duplicate=self.refresh_on_duplicate,
        )

    def serving_spec(self, stored: IndexSpec) -> IndexSpec:
        """The spec to serve an index stored with ``stored`` by: the stored one. A parameter these settings
        did not give (no flag, variable or file entry) follows the index; one given with another value
        refuses, and so does an index normalised by another version of the text normalisation.

        Raises:
            ParameterMismatchError: naming each given parameter that differs, where it was given, how to
                serve the index as built, and the `dedupd rebuild` command that would change it.
        """
        asked = self.index_spec()
        conflicts = [
            (name, setting)
            for name, setting in _SPEC_SETTINGS
            if self.given_at(setting) is not None and getattr(asked, name) != getattr(stored, name)
        ]
        # an index normalised otherwise takes a rebuild, whatever is given (the spec's own refusal says so)
        stored.with_changes({"normalization": NORMALIZATION}).require_same(stored, self.prefix)
        if not conflicts:
            return stored
        built = ", and ".join(
            f"{name} {_shown(stored, name)}, but {self.given_at(setting)} gives {_shown(asked, name)}"
            for name, setting in conflicts
        )
        names = [name for name, _ in conflicts]
        unset = ", ".join(sorted({_how_to_drop(self.given_at(setting) or "") for _, setting in conflicts}))
        raise ParameterMismatchError(
            f"the index under prefix {self.prefix!r} was built with {built}. To serve the index as it was "
            f"built, {unset} (settings you do not give follow the index); to reindex with the new values, "
            f"run `dedupd rebuild {asked.flags(names)}`."
        )

    def rebuild_target(self, stored: IndexSpec) -> IndexSpec:
        """The spec a rebuild of ``stored`` builds: only the parameters set explicitly (flags, ``DEDUPD_*``,
        the TOML file) change; bands x rows are chosen again when the threshold or num_perm changes and
        they are not given; the text normalisation is always this version's (an index normalised by an
        older one is rebuilt by ``dedupd rebuild`` without flags)."""
        given = self.model_fields_set
        direct = ("shingle", "num_perm", "seed", "minhash", "threshold", "verify")
        changes: dict[str, Any] = {name: getattr(self, name) for name in direct if name in given}
        for name in ("retention_s", "max_documents"):  # (0: no bound)
            if name in given:
                changes[name] = getattr(self, name) or None
        if "refresh_on_duplicate" in given:
            changes["refresh_on_duplicate"] = self.refresh_on_duplicate
        changes["normalization"] = NORMALIZATION
        if "capacity" in given:
            changes["shard_bits"] = shard_bits_for(self.capacity)
        if self.bands is not None and self.rows is not None:
            changes["bands"], changes["rows"] = self.bands, self.rows
        elif given & {"threshold", "num_perm", "fp_weight", "fn_weight"}:
            lsh = LSHParams.choose(
                changes.get("threshold", stored.threshold),
                changes.get("num_perm", stored.num_perm),
                self.fp_weight,
                self.fn_weight,
            )
            changes["bands"], changes["rows"] = lsh.bands, lsh.rows
        return stored.with_changes(changes)

    def consumer_name(self) -> str:
        """The configured consumer name, or a unique one for this process."""
        if self.consumer:
            return self.consumer
        return f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:6]}"

    def redacted_url(self) -> str:
        """The Redis URL with any password hidden, fit for logs."""
        if not self.redis_url:
            return f"embedded ({self.data_dir})"
        return redact_url(self.redis_url)


def load_settings(**overrides: Any) -> Settings:
    """Build the settings, turning validation errors into one readable ConfigError.

    Args:
        overrides: values from CLI flags (None values are ignored).

    Raises:
        ConfigError: naming each bad setting and why.
    """
    from pydantic import ValidationError

    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        settings = Settings(**clean)
    except ValidationError as exc:
        path = find_config_file()
        in_file = read_config_file(path) if path is not None else {}
        problems = [_describe(err, clean, in_file, path) for err in exc.errors()]
        raise ConfigError("invalid settings: " + "; ".join(problems)) from None
    for name in clean:  # (the CLI's flags; a program's keyword arguments read the same)
        settings._given_at[name] = "--" + name.replace("_", "-")
    return settings


# Each index parameter and the setting that gives it (shard_bits: capacity; bands and rows: themselves).
_SPEC_SETTINGS = (
    ("shingle", "shingle"),
    ("num_perm", "num_perm"),
    ("seed", "seed"),
    ("minhash", "minhash"),
    ("threshold", "threshold"),
    ("verify", "verify"),
    ("bands", "bands"),
    ("rows", "rows"),
    ("shard_bits", "capacity"),
    ("retention_s", "retention_s"),
    ("max_documents", "max_documents"),
    ("refresh_on_duplicate", "refresh_on_duplicate"),
)


def _shown(spec: IndexSpec, name: str) -> str:
    """A spec parameter as a user sets it (shard_bits as the capacity it comes from)."""
    if name == "shard_bits":
        return f"(capacity {BUCKETS_PER_HASH << spec.shard_bits:,})"
    if getattr(spec, name) is None:  # (a retention bound)
        return "unset (no bound)"
    return str(getattr(spec, name))


def _how_to_drop(where: str) -> str:
    """How to stop giving a setting given at ``where`` (a flag, a variable or a file)."""
    if where.startswith("--"):
        return f"leave out {where}"
    if where.startswith(ENV_PREFIX):
        return f"unset {where}"
    if where.endswith("given to Settings"):
        return "give it no value in code"
    return f"remove it from {where}"


# what pydantic puts before the message of a ValueError or an assert raised in a validator
_PYDANTIC_PREFIX = re.compile(r"^(?:Value error|Assertion failed), ")


def _describe(err: Any, overrides: dict[str, Any], in_file: dict[str, Any], path: Path | None) -> str:
    """One validation error, named after where its value came from: a flag or ``DEDUPD_*`` variable
    (``threshold (DEDUPD_THRESHOLD)``), or the TOML file (``threshold (in FILE)``)."""
    loc = ".".join(str(x) for x in err["loc"])
    msg = _PYDANTIC_PREFIX.sub("", str(err["msg"]))  # our validators' own words, not "Value error, ..."
    if not loc:
        return msg
    top = str(err["loc"][0])
    env = ENV_PREFIX + top.upper()
    from_env = top not in overrides and any(k.upper() == env for k in os.environ)
    from_file = top in in_file and top not in overrides and not from_env
    if err["type"] == "extra_forbidden":
        close = _close_match(top, list(Settings.model_fields))
        where = f"{path}: " if from_file else ""
        return f"{where}unknown setting {top!r}" + (f" (did you mean {close!r}?)" if close else "")
    return f"{loc} ({f'in {path}' if from_file else env}): {msg}"
