"""A stored document as one packed Redis string (pure: encoding and decoding, no Redis).

Layout, little-endian: a header ``<BHIIIHHI`` (version, num_perm, unit count, id length, tail length,
input entry id length, source length, shingle count), then the raw signature (uint32 x num_perm), the id,
the tail, the input entry id, the source (UTF-8), and the 32-bit shingle fingerprints (uint32 each).
One string instead of a hash saves the field names and the hash's own overhead (about 40% per document).

Version 2, for a short document: num_perm is 0 (no signature is stored) and the shingles are its sorted
distinct 64-bit shingle hashes (uint64 each), from which the raw signature and the 32-bit fingerprints are
recomputed on reading. A description of 6 words has 4 shingles: 32 bytes instead of the 512 of a
128-value signature. Version 1 records are read as before (the scripts find the input entry id the same
way in both: the header's num_perm says how long the signature is).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dedupd.errors import ConfigError
from dedupd.similarity.fingerprint import Fingerprint, Fingerprinter
from dedupd.similarity.shingling import distinct32

VERSION = 1  # signature and 32-bit fingerprints
VERSION_HASHES = 2  # 64-bit shingle hashes only
HEADER = struct.Struct("<BHIIIHHI")  # the scripts read the input entry id with it (scripts/_entry_of.lua)
# position in the header of the signature length and of the id, tail and input entry id lengths
HEADER_FIELDS = (
    "version",
    "num_perm",
    "n_units",
    "id_len",
    "tail_len",
    "entry_len",
    "source_len",
    "shingles",
)
_U32 = np.dtype("<u4")
_U64 = np.dtype("<u8")


@dataclass(frozen=True, slots=True, eq=False)
class Record:
    """A stored document."""

    num: int
    doc_id: str
    fingerprint: Fingerprint
    entry_id: str
    source: str | None = None


def encode_record(doc_id: str, fp: Fingerprint, entry_id: str, source: str | None, shingles: bool) -> bytes:
    """Pack a document: its 64-bit shingle hashes when it has them (a short document), else its raw signature
    and, only when ``shingles``, its 32-bit fingerprints."""
    ident, tail, entry, src = doc_id.encode(), fp.tail.encode(), entry_id.encode(), (source or "").encode()
    if fp.hashes is not None:
        header = HEADER.pack(
            VERSION_HASHES, 0, fp.n_units, len(ident), len(tail), len(entry), len(src), fp.hashes.shape[0]
        )
        return b"".join((header, ident, tail, entry, src, fp.hashes.astype(_U64, copy=False).tobytes()))
    sh = fp.shingles.astype(_U32, copy=False).tobytes() if shingles else b""
    header = HEADER.pack(
        VERSION, fp.raw.shape[0], fp.n_units, len(ident), len(tail), len(entry), len(src), len(sh) // 4
    )
    return b"".join((header, fp.raw.astype(_U32, copy=False).tobytes(), ident, tail, entry, src, sh))


@dataclass(slots=True)
class _Parsed:
    num: int
    raw: npt.NDArray[np.uint32] | None  # None until recomputed (a version-2 record)
    n_units: int
    fields: list[str]  # id, tail, input entry id, source
    shingles: npt.NDArray[np.uint32] | None
    hashes: npt.NDArray[np.uint64] | None = None


def decode_records(
    nums: Sequence[int], blobs: Sequence[bytes | None], fingerprinter: Fingerprinter
) -> dict[int, Record | None]:
    """Unpack stored documents (signatures densified together; those of short documents recomputed from
    their shingle hashes, all in one call); a missing one decodes to None.

    Raises:
        ConfigError: on a record of another version or signature length (the index is inconsistent).
    """
    num_perm = fingerprinter.spec.num_perm
    out: dict[int, Record | None] = {}
    parsed: list[_Parsed] = []
    for num, blob in zip(nums, blobs, strict=True):
        if not blob:
            out[num] = None
            continue
        version, perm, n_units, n_id, n_tail, n_in, n_src, n_sh = HEADER.unpack_from(blob)
        if not ((version == VERSION and perm == num_perm) or (version == VERSION_HASHES and perm == 0)):
            raise ConfigError(
                f"document record {num} has version {version} and {perm} signature values; the "
                f"index expects version {VERSION} and {num_perm} (or version {VERSION_HASHES}): "
                "run `dedupd rebuild`"
            )
        at = HEADER.size
        raw = np.frombuffer(blob, dtype=_U32, count=perm, offset=at).astype(np.uint32) if perm else None
        at += 4 * perm
        fields = []
        for size in (n_id, n_tail, n_in, n_src):
            fields.append(blob[at : at + size].decode())
            at += size
        if raw is None:
            hashes = np.frombuffer(blob, dtype=_U64, count=n_sh, offset=at).astype(np.uint64)
            parsed.append(_Parsed(num, None, n_units, fields, None, hashes))
        else:
            sh = np.frombuffer(blob, dtype=_U32, count=n_sh, offset=at).astype(np.uint32)
            parsed.append(_Parsed(num, raw, n_units, fields, sh))
    if not parsed:
        return out
    short = [p for p in parsed if p.raw is None]
    if short:  # the raw signatures and 32-bit fingerprints of the short documents, in one call each
        offsets = np.zeros(len(short) + 1, dtype=np.int64)
        np.cumsum([p.hashes.shape[0] for p in short], out=offsets[1:])  # type: ignore[union-attr]
        flat = np.concatenate([p.hashes for p in short if p.hashes is not None])
        raws = fingerprinter.minhasher.signatures(flat, offsets, densify=False)
        fps32, fp_off = distinct32(flat, offsets)
        for i, p in enumerate(short):
            p.raw, p.shingles = raws[i], fps32[fp_off[i] : fp_off[i + 1]]
    dense = fingerprinter.minhasher.densify(np.stack([p.raw for p in parsed]))  # type: ignore[misc]
    for p, sig in zip(parsed, dense, strict=True):
        doc_id, tail, entry, src = p.fields
        assert p.raw is not None and p.shingles is not None
        fp = Fingerprint(p.shingles, sig, tail, p.n_units, p.raw, p.hashes)
        out[p.num] = Record(p.num, doc_id, fp, entry, src or None)
    return out


def record_doc_id(blob: bytes) -> str:
    """Only the id of a packed record."""
    _, perm, _, n_id, *_ = HEADER.unpack_from(blob)
    at = HEADER.size + 4 * perm
    return blob[at : at + n_id].decode()


def cluster_name(num: int, record: bytes | None, gone: bytes | str | None = None) -> str:
    """A cluster's name: its root document's id, from the root's record; when that is gone, the id its
    gone-node entry kept (``gone``, keys.uf_gone: ``'=' + id`` for an expired root), else ``#n`` (a deleted
    root's).

    >>> cluster_name(7, None, b"=story-1"), cluster_name(7, None, b"1"), cluster_name(7, None)
    ('story-1', '#7', '#7')
    """
    if record:
        return record_doc_id(record)
    name = gone.decode() if isinstance(gone, bytes) else gone
    return name[1:] if name and name.startswith("=") else f"#{num}"


def record_entry_id(blob: bytes) -> str:
    """Only the input entry id (the version) of a packed record."""
    _, perm, _, n_id, n_tail, n_in, *_ = HEADER.unpack_from(blob)
    at = HEADER.size + 4 * perm + n_id + n_tail
    return blob[at : at + n_in].decode()
