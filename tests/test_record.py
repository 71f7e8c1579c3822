"""Packed document records: short documents store their 64-bit shingle hashes instead of a signature.

A record read back must give the daemon the same fingerprint it computed: raw and densified signature,
32-bit fingerprints (exact verification), tail and unit count, whichever form was stored; and the short
form must be the smaller one. Version-1 records (signature form, written by earlier versions) still read.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dedupd.errors import ConfigError
from dedupd.index.record import VERSION, VERSION_HASHES, Record, decode_records, encode_record, record_doc_id
from dedupd.index.record_cache import DecodedRecords
from dedupd.similarity.fingerprint import AppendTo, Fingerprint, Fingerprinter
from dedupd.similarity.spec import IndexSpec

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
    "pi",
    "rho",
]


def text_of(n_words: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, n_words).tolist()) + f" w{seed}"


def same(a: Fingerprint, b: Fingerprint, shingles: bool) -> None:
    assert np.array_equal(a.raw, b.raw)
    assert np.array_equal(a.signature, b.signature)
    assert a.tail == b.tail and a.n_units == b.n_units
    if shingles:
        assert np.array_equal(a.shingles, b.shingles)


@pytest.mark.parametrize("minhash", ["oph", "classic"])
@pytest.mark.parametrize("exact", [True, False])
def test_round_trip_short_and_long(minhash: str, exact: bool) -> None:
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4, minhash), keep_shingles=exact)
    texts = [
        "",
        "one",
        "two words",
        text_of(10, 1),
        text_of(30, 2),
        text_of(63, 3),
        text_of(64, 4),
        text_of(200, 5),
        "x " * 500,
    ]  # the last: 500 shingles, 1 distinct
    fps = fpr.compute(texts)
    blobs = [
        encode_record(f"id{i}", fp, f"{i}-0", "src" if i % 2 else None, exact) for i, fp in enumerate(fps)
    ]
    got = decode_records(list(range(len(texts))), blobs, fpr)
    assert {b[0] for b in blobs} == {VERSION, VERSION_HASHES}  # both forms, read back in one call
    for i, fp in enumerate(fps):
        rec = got[i]
        assert rec is not None and rec.doc_id == f"id{i}" and rec.entry_id == f"{i}-0"
        assert rec.source == ("src" if i % 2 else None)
        assert record_doc_id(blobs[i]) == f"id{i}"
        same(rec.fingerprint, fp, exact)
        hashes = fpr.shingler.batch([texts[i]]).hashes
        # short: few distinct shingles, and not so many repeats that sorting them would not pay
        short = np.unique(hashes).shape[0] <= fpr.small and hashes.shape[0] <= 2 * fpr.small
        assert blobs[i][0] == (VERSION_HASHES if short else VERSION)
        assert (fp.hashes is not None) == short
        if short:  # the short form is the smaller one
            long_form = encode_record(
                f"id{i}", dataclasses.replace(fp, hashes=None), f"{i}-0", "src" if i % 2 else None, exact
            )
            assert len(blobs[i]) < len(long_form)
            assert np.array_equal(rec.fingerprint.hashes, fp.hashes)


def test_limit_is_where_the_hashes_stop_being_smaller() -> None:
    spec = IndexSpec("word:1", 128, 1, 32, 4)
    assert Fingerprinter(spec, keep_shingles=True).small == 127  # 8n < 4*128 + 4n
    assert Fingerprinter(spec, keep_shingles=False).small == 63  # 8n < 4*128
    fpr = Fingerprinter(spec, keep_shingles=True)
    at, over = fpr.compute([" ".join(f"w{i}" for i in range(127)), " ".join(f"w{i}" for i in range(128))])
    assert at.hashes is not None and at.hashes.shape == (127,)
    assert over.hashes is None


def test_version_1_records_still_read() -> None:
    """A record in the signature form (what earlier versions wrote for every document) reads the same."""
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4), keep_shingles=True)
    fp = fpr.compute(["a short description of a package"])[0]
    assert fp.hashes is not None
    old = encode_record("pkg", dataclasses.replace(fp, hashes=None), "5-0", None, True)
    assert old[0] == VERSION
    rec = decode_records([1], [old], fpr)[1]
    assert rec is not None and rec.fingerprint.hashes is None
    same(rec.fingerprint, fp, True)


def test_mismatched_signature_length_names_rebuild() -> None:
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4), keep_shingles=True)
    long_text = text_of(300, 9)
    blob = encode_record("d", fpr.compute([long_text])[0], "1-0", None, True)
    other = Fingerprinter(IndexSpec("word:3", 32, 7, 8, 4), keep_shingles=True)
    with pytest.raises(ConfigError, match="dedupd rebuild"):
        decode_records([1], [blob], other)


@pytest.mark.parametrize("exact", [True, False])
def test_append_to_a_decoded_short_record_equals_upsert(exact: bool) -> None:
    """Appends read the stored record: from the short form, across the limit into the long form."""
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4), keep_shingles=exact)
    text = text_of(8, 11)
    fp = fpr.compute([text])[0]
    forms = []
    for chunk in [text_of(5, 12), text_of(40, 13), text_of(80, 14), "tail words"]:
        blob = encode_record("d", fp, "1-0", None, exact)
        forms.append(blob[0])
        stored = decode_records([1], [blob], fpr)[1]
        assert stored is not None
        fp = fpr.compute([AppendTo(stored.fingerprint, chunk)])[0]
        text = text + "\n" + chunk
        full = fpr.compute([text])[0]
        same(fp, full, exact)
        assert (fp.hashes is None) == (full.hashes is None)
        if fp.hashes is not None:
            assert np.array_equal(fp.hashes, full.hashes)
    assert forms[0] == VERSION_HASHES and forms[-1] == VERSION


# ----- decoded records kept by their stored bytes (record_cache.DecodedRecords) -----
def _blob(fpr: Fingerprinter, doc_id: str, text: str, entry: str) -> bytes:
    return encode_record(doc_id, fpr.compute([text])[0], entry, None, True)


def test_a_record_changed_since_it_was_kept_is_decoded_anew() -> None:
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4), keep_shingles=True)
    cache = DecodedRecords()
    old = _blob(fpr, "a", "the first version of this text", "1-0")
    new = _blob(fpr, "a", "an entirely different second text", "2-0")
    first = cache.decode([5], [old], fpr)[5]
    second = cache.decode([5], [new], fpr)[5]
    assert first is not None and second is not None and second is not first
    assert second.entry_id == "2-0"
    assert (
        second.fingerprint.shingles.tolist()
        == decode_records([5], [new], fpr)[5].fingerprint.shingles.tolist()
    )  # type: ignore[union-attr]
    assert cache.decode([5], [None], fpr) == {5: None}  # deleted meanwhile: gone, not the kept one


def test_kept_records_are_bounded_in_bytes_oldest_out_first_and_large_ones_not_kept() -> None:
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4), keep_shingles=True)
    blobs = [
        _blob(fpr, f"d{i:02d}", f"text number {i:02d} of the bounded cache test", f"{i:02d}-0")
        for i in range(20)
    ]
    size = len(blobs[0])
    assert {len(b) for b in blobs} == {size}
    one = DecodedRecords()
    one.decode([0], [blobs[0]], fpr)
    held = one.stored_bytes  # stored bytes and decoded arrays
    assert held > size
    cache = DecodedRecords(max_bytes=5 * held, max_entry_bytes=size)
    first = cache.decode(list(range(20)), blobs, fpr)
    assert len(cache) == 5 and cache.stored_bytes == 5 * held
    assert cache.decode([19], [blobs[19]], fpr)[19] is first[19]  # among the newest: kept
    assert cache.decode([0], [blobs[0]], fpr)[0] is not first[0]  # the oldest went first
    big = _blob(fpr, "big", " ".join(WORDS * 20), "99-0")
    assert len(big) > size
    assert cache.decode([99], [big], fpr)[99] is not cache.decode([99], [big], fpr)[99]  # never kept


@pytest.mark.parametrize("minhash", ["oph", "classic"])
@pytest.mark.parametrize("exact", [True, False])
def test_a_remembered_written_record_reads_as_its_decoding_would(minhash: str, exact: bool) -> None:
    """The daemon keeps each record it writes with the fingerprint it computed (no decode when a later
    batch reads it back): that fingerprint must be what decoding the stored bytes gives, short and long."""
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4, minhash), keep_shingles=exact)
    for n, text in enumerate([text_of(6, 1), text_of(200, 2), "", text_of(40, 3)]):
        fp = fpr.compute([text])[0]
        blob = encode_record(f"d{n}", fp, f"{n}-0", "feed", exact)
        cache = DecodedRecords()
        cache.remember(n, blob, Record(n, f"d{n}", fp, f"{n}-0", "feed"))
        got = cache.decode([n], [bytes(blob)], fpr)[n]
        decoded = decode_records([n], [blob], fpr)[n]
        assert got is not None and decoded is not None
        assert cache.decode([n], [blob], fpr)[n] is got  # kept: no decode
        same(fp, got.fingerprint, True)  # the computed fingerprint (its arrays copied: test below)
        same(fp, decoded.fingerprint, exact)
        assert (got.doc_id, got.entry_id, got.source) == (decoded.doc_id, decoded.entry_id, decoded.source)
        other = encode_record(f"d{n}", fpr.compute([text + " changed"])[0], f"{n}-1", None, exact)
        assert cache.decode([n], [other], fpr)[n].entry_id == f"{n}-1"  # type: ignore[union-attr]


def test_a_remembered_record_holds_its_own_arrays_not_its_batchs() -> None:
    """A batch's fingerprints are slices of the batch's arrays; the cache keeps a record for many batches, so a
    remembered one must not keep its whole batch's arrays alive (bytes the bound does not count: 3.3x the
    bound on the Debian descriptions before this)."""
    import gc
    import weakref

    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4), keep_shingles=True)
    texts = [f"text number {i} of a batch whose arrays are shared by all its documents" for i in range(50)]
    fps = fpr.compute(texts)
    batch_arrays = {id(a.base): weakref.ref(a.base) for a in (fps[0].shingles, fps[0].signature, fps[0].raw)}
    assert all(ref() is not None for ref in batch_arrays.values())  # views indeed
    blob = encode_record("d0", fps[0], "1-0", None, True)
    cache = DecodedRecords()
    cache.remember(7, blob, Record(7, "d0", fps[0], "1-0"))
    kept = cache.decode([7], [blob], fpr)[7]
    assert kept is not None
    assert kept.fingerprint.shingles.tolist() == fps[0].shingles.tolist()
    assert kept.fingerprint.signature.tolist() == fps[0].signature.tolist()
    del fps
    gc.collect()
    assert all(ref() is None for ref in batch_arrays.values())  # the batch's arrays are gone
    assert cache.decode([7], [blob], fpr)[7] is kept  # and the record is still kept


def test_records_decoded_together_are_kept_with_arrays_of_their_own() -> None:
    fpr = Fingerprinter(IndexSpec("word:3", 64, 7, 16, 4), keep_shingles=True)
    texts = [text_of(200, i) for i in range(5)]
    blobs = [encode_record(f"d{i}", fp, f"{i}-0", None, True) for i, fp in enumerate(fpr.compute(texts))]
    cache = DecodedRecords()
    got = cache.decode(list(range(5)), blobs, fpr)
    for i in range(5):
        record = got[i]
        assert record is not None and cache.decode([i], [blobs[i]], fpr)[i] is record  # kept
        fp = record.fingerprint
        assert all(
            a is None or not isinstance(a.base, np.ndarray) for a in (fp.shingles, fp.signature, fp.raw)
        )
