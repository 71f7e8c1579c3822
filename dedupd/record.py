"""A stored document as one packed Redis string (pure: encoding and decoding, no Redis).

Layout, little-endian: a header ``<BHIIIHHI`` (version, num_perm, unit count, id length, tail length,
input entry id length, source length, shingle count), then the raw signature (uint32 x num_perm), the id,
the tail, the input entry id, the source (UTF-8), and the 32-bit shingle fingerprints (uint32 each).
One string instead of a hash saves the field names and the hash's own overhead (about 40% per document).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dedupd.errors import ConfigError
from dedupd.fingerprint import Fingerprint, Fingerprinter

VERSION = 1
_HEADER = struct.Struct("<BHIIIHHI")
_U32 = np.dtype("<u4")


@dataclass(frozen=True, slots=True, eq=False)
class Record:
    """A stored document."""

    num: int
    doc_id: str
    fingerprint: Fingerprint
    entry_id: str
    source: str | None = None


def encode_record(doc_id: str, fp: Fingerprint, entry_id: str, source: str | None, shingles: bool) -> bytes:
    """Pack a document (its shingle fingerprints only when ``shingles``)."""
    ident, tail, entry, src = doc_id.encode(), fp.tail.encode(), entry_id.encode(), (source or "").encode()
    sh = fp.shingles.astype(_U32, copy=False).tobytes() if shingles else b""
    header = _HEADER.pack(VERSION, fp.raw.shape[0], fp.n_units, len(ident), len(tail), len(entry), len(src),
                          len(sh) // 4)
    return b"".join((header, fp.raw.astype(_U32, copy=False).tobytes(), ident, tail, entry, src, sh))


def decode_records(nums: Sequence[int], blobs: Sequence[bytes | None], fingerprinter: Fingerprinter
                   ) -> dict[int, Record | None]:
    """Unpack stored documents (signatures densified together); a missing one decodes to None.

    Raises:
        ConfigError: on a record of another version or signature length (the index is inconsistent).
    """
    num_perm = fingerprinter.spec.num_perm
    out: dict[int, Record | None] = {}
    parsed = []
    for num, blob in zip(nums, blobs, strict=True):
        if not blob:
            out[num] = None
            continue
        version, perm, n_units, n_id, n_tail, n_in, n_src, n_sh = _HEADER.unpack_from(blob)
        if version != VERSION or perm != num_perm:
            raise ConfigError(f"document record {num} has version {version} and {perm} signature values; the "
                              f"index expects version {VERSION} and {num_perm}: run `dedupd rebuild`")
        at = _HEADER.size
        raw = np.frombuffer(blob, dtype=_U32, count=perm, offset=at)
        at += 4 * perm
        fields = []
        for size in (n_id, n_tail, n_in, n_src):
            fields.append(blob[at : at + size].decode())
            at += size
        sh = np.frombuffer(blob, dtype=_U32, count=n_sh, offset=at).astype(np.uint32)
        parsed.append((num, raw, n_units, fields, sh))
    if parsed:
        dense = fingerprinter.minhasher.densify(np.stack([p[1] for p in parsed]))
        for (num, raw, n_units, (doc_id, tail, entry, src), sh), sig in zip(parsed, dense, strict=True):
            fp = Fingerprint(sh, sig, tail, n_units, raw.astype(np.uint32))
            out[num] = Record(num, doc_id, fp, entry, src or None)
    return out


def record_doc_id(blob: bytes) -> str:
    """Only the id of a packed record."""
    _, perm, _, n_id, *_ = _HEADER.unpack_from(blob)
    at = _HEADER.size + 4 * perm
    return blob[at : at + n_id].decode()

