"""Basket loading: CSR arrays, dense ids by frequency, file formats and their errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from mining_oracle import SEED_BASKETS

from dedupd.errors import InputError
from dedupd.mining.baskets import Baskets, load_baskets, parse_lines


def test_csr_holds_each_basket_sorted_and_distinct() -> None:
    """Rows come back as the distinct items of each basket; duplicates within a basket count once."""
    b = Baskets.from_lists([["a", "b", "a"], [], ["c", "a"]])
    assert b.n_baskets == 3
    assert [b.names(b.row(i)) for i in range(3)] == [["a", "b"], [], ["a", "c"]]
    assert all((np.diff(b.row(i)) > 0).all() for i in range(3))
    assert b.items.dtype == np.int32 and b.indptr.dtype == np.int64
    assert dict(zip(b.vocab, b.item_counts.tolist(), strict=True)) == {"a": 2, "b": 1, "c": 1}


def test_ids_ascend_with_frequency() -> None:
    """The rarest item gets id 0 and the most frequent the largest id."""
    b = Baskets.from_lists(SEED_BASKETS)
    assert b.vocab[-1] == "Milk"
    assert (np.diff(b.item_counts) >= 0).all()


def test_take_and_split_keep_the_vocabulary() -> None:
    """Samples and chunks share ids with the whole, and the chunks partition the baskets."""
    b = Baskets.from_lists(SEED_BASKETS)
    parts = b.split(2)
    assert sum(p.n_baskets for p in parts) == 5
    assert sum(p.item_counts for p in parts).tolist() == b.item_counts.tolist()
    t = b.take(np.array([4, 1], dtype=np.int64))
    assert t.names(t.row(0)) == ["Coke", "Diaper", "Milk"] and t.names(t.row(1)) == ["Beer", "Bread"]


def test_whitespace_and_jsonl_files(tmp_path: Path) -> None:
    """Both file formats give the same baskets; blank lines are skipped."""
    plain = tmp_path / "b.txt"
    plain.write_text("Bread Coke Milk\n\nBeer\tBread\n")
    js = tmp_path / "b.jsonl"
    js.write_text('{"items": ["Bread", "Coke", "Milk"]}\n["Beer", "Bread"]\n')
    a, c = load_baskets(plain), load_baskets(js)
    assert [a.names(a.row(i)) for i in range(2)] == [c.names(c.row(i)) for i in range(2)]


def test_bad_lines_name_the_line_and_the_fix(tmp_path: Path) -> None:
    """A malformed JSON line is an InputError naming the file and line."""
    with pytest.raises(InputError, match=r"x.jsonl:2: .*expected"):
        parse_lines(['{"items": ["a"]}', '{"items": "a"}'], "x.jsonl")
    with pytest.raises(InputError, match="cannot read"):
        load_baskets(tmp_path / "missing.txt")


def test_streaming_loader_equals_list_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The block-wise plain-text loader gives the baskets of the line parser, across block edges,
    with tabs, blank lines, repeated items and no final newline."""
    import dedupd.mining.baskets as mod
    from dedupd.mining.baskets import read_basket_lists

    p = tmp_path / "b.txt"
    lines = [f"i{i % 7} i{i % 3}\tj{i % 5}  i{i % 7}" if i % 4 else "" for i in range(300)]
    p.write_text("\n".join(lines))
    monkeypatch.setattr(mod, "READ_BYTES", 37)
    a = load_baskets(p)
    b = Baskets.from_lists(read_basket_lists(p))
    assert a.n_baskets == b.n_baskets == 225
    assert [a.names(a.row(i)) for i in range(a.n_baskets)] == [b.names(b.row(i)) for i in range(b.n_baskets)]
    empty = tmp_path / "e.txt"
    empty.write_text("\n\n")
    assert load_baskets(empty).n_baskets == 0
