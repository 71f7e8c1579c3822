"""The exception hierarchy: every error dedupd raises on purpose is a DedupdError."""

from __future__ import annotations


class DedupdError(Exception):
    """Base class of every error dedupd raises deliberately."""


class ConfigError(DedupdError):
    """A setting is invalid; the message says which and how to fix it."""


class ParameterMismatchError(DedupdError):
    """The index was built with other parameters than the ones requested."""


class RedisUnavailableError(DedupdError):
    """Redis cannot be reached (after retries)."""


class InputError(DedupdError):
    """A stream entry is malformed; ``code`` is the stable dead-letter code."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail


class DocumentError(InputError, ConfigError):
    """A document the client refuses before sending anything: one a daemon would dead-letter (``code`` is
    that dead-letter code, such as ``id_too_long``), or one Redis cannot carry. The message (``detail``)
    names the field. Also a ConfigError, which the client raised for these before."""

    def __str__(self) -> str:
        return self.detail


class ReplicasBehindError(DedupdError):
    """Fewer replicas acknowledged a batch's writes than ``wait_replicas`` asks, within ``wait_timeout_ms``.

    A passing state (a replica catching up, a failover): the batch is not acknowledged and is done again.
    """
