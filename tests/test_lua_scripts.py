"""The Lua scripts as files (dedupd/index/scripts/*.lua), loaded by name (lua.load): each names its KEYS and
ARGV in its header and binds them to named locals; the loader fills every layout constant from Python and
refuses an unknown script, a placeholder without a value and a value no placeholder uses; the constants the
scripts hold are Python's (the refused bit, the op codes, the document id rule, on a real server too)."""

from __future__ import annotations

import re
import struct
import tomllib
from pathlib import Path

import numpy as np
import pytest
import redis

from dedupd.daemon.stream import ConsumerStream
from dedupd.index import argv, lua, unionfind
from dedupd.index.buckets import BucketOps, Hits
from dedupd.index.keys import DOC_FIELD, Keys, entry_doc
from dedupd.index.lua import FULL_BIT, REFUSED_BIT, Op

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "dedupd" / "index" / "scripts"
FILES = sorted(SCRIPTS.glob("*.lua"))
MAIN = [p.stem for p in FILES if not p.stem.startswith("_")]
FRAGMENTS = [p.stem for p in FILES if p.stem.startswith("_")]
FIXED = re.compile(r"\b(KEYS|ARGV)\[(\d+)\]")  # an argument read by a fixed index
ENTRY = re.compile(r"^-- (KEYS|ARGV)\[(\d+)(\.\.)?\] (\w+): \S")  # a header's line naming one
NONE = re.compile(r"^-- (KEYS|ARGV): none$")


def _header(text: str) -> tuple[list[str], list[str]]:
    """A file's leading comment lines, and the lines after them."""
    lines = text.splitlines()
    n = next(i for i, line in enumerate(lines) if not line.startswith("--") or line.startswith("--#include"))
    return lines[:n], lines[n:]


def _bindings(lines: list[str]) -> dict[str, str]:
    """The named locals the first lines bind (``local a, b = KEYS[1], tonumber(ARGV[2])``): name -> value."""
    out: dict[str, str] = {}
    for line in lines:
        m = re.match(r"^local ([\w, ]+) = (.+)$", line)
        if not m or not FIXED.search(line):
            break
        names = [x.strip() for x in m.group(1).split(",")]
        values = [x.strip() for x in m.group(2).split(", ")]
        assert len(names) == len(values), line
        out.update(zip(names, values, strict=True))
    return out


def test_the_scripts_and_their_layouts_are_the_same_names() -> None:
    assert MAIN and FRAGMENTS
    assert sorted(lua.LAYOUT) == MAIN


@pytest.mark.parametrize("name", MAIN)
def test_a_script_names_its_keys_and_argv_and_binds_them(name: str) -> None:
    header, body = _header((SCRIPTS / f"{name}.lua").read_text(encoding="utf-8"))
    assert header[0].startswith(f"-- {name}: ")
    named: dict[str, list[tuple[int, bool, str]]] = {"KEYS": [], "ARGV": []}
    for line in header:
        if m := ENTRY.match(line):
            named[m.group(1)].append((int(m.group(2)), bool(m.group(3)), m.group(4)))
    for kind in ("KEYS", "ARGV"):
        none = any(NONE.match(line) and kind in line for line in header)
        assert none != bool(named[kind]), f"{name}: the header names no {kind} (or says '-- {kind}: none')"
        positions = [i for i, _, _ in named[kind]]
        assert positions == list(range(1, len(positions) + 1)), (
            f"{name}: {kind} named in order, none left out"
        )
        assert all(not rest for _, rest, _ in named[kind][:-1]), f"{name}: only the last {kind} is 'the rest'"
    bound = _bindings(body)
    for kind in ("KEYS", "ARGV"):
        for i, rest, local in named[kind]:
            if not rest:
                assert local in bound, f"{name}: {kind}[{i}] is not bound to the local {local!r}"
                assert FIXED.findall(bound[local]) == [(kind, str(i))], f"{name}: {local} = {bound[local]}"
    # past its bindings, a script (its fragments included) reads no argument by a fixed index: by name only
    rendered = lua.load(name).splitlines()
    assert rendered[: len(header)] == header
    past = len(header) + _binding_lines(body)
    assert rendered[len(header) : past] == body[: _binding_lines(body)]
    assert not FIXED.findall(_code(rendered[past:]))


def _binding_lines(lines: list[str]) -> int:
    """How many of the first lines bind arguments read by a fixed index to named locals."""
    return next(i for i, line in enumerate(lines) if not (line.startswith("local ") and FIXED.search(line)))


def _code(lines: list[str]) -> str:
    """The lines without their comments (no string of the scripts holds '--')."""
    return "\n".join(re.sub(r"--.*", "", line) for line in lines)


@pytest.mark.parametrize("name", FRAGMENTS)
def test_a_fragment_says_what_it_is_and_reads_no_argument_by_index(name: str) -> None:
    text = (SCRIPTS / f"{name}.lua").read_text(encoding="utf-8")
    assert text.startswith(f"-- {name} (fragment): ")
    assert not FIXED.findall(_code(text.splitlines()))
    with pytest.raises(ValueError, match="no Lua script"):
        lua.load(name)  # a fragment is no script


def test_every_fragment_is_included_somewhere() -> None:
    included = set()
    for p in FILES:
        included |= set(lua.INCLUDE.findall(p.read_text(encoding="utf-8")))
    assert included == set(FRAGMENTS)


def test_the_loader_refuses_an_unknown_script() -> None:
    for name in ("nope", "../keys", "BUCKETS", ""):
        with pytest.raises(ValueError, match="no Lua script"):
            lua.load(name)
    with pytest.raises(ValueError, match="no Lua script"):
        lua.render("nope", {})


def test_the_loader_refuses_a_missing_or_an_unused_placeholder() -> None:
    values = dict(lua.LAYOUT["buckets"])
    assert lua.render("buckets", values) == lua.BUCKETS
    missing = {k: v for k, v in values.items() if k != "REFUSED_BIT"}
    with pytest.raises(ValueError, match=r"without a value \['REFUSED_BIT'\]"):
        lua.render("buckets", missing)
    with pytest.raises(ValueError, match=r"no placeholder uses \['EXTRA'\]"):
        lua.render("buckets", {**values, "EXTRA": 1})
    with pytest.raises(ValueError, match=r"no placeholder uses \['META_GEN'\]"):
        lua.render("xadd_many", {"META_GEN": "gen"})


def test_no_placeholder_is_left_in_a_loaded_script() -> None:
    for name in MAIN:
        text = lua.load(name)
        assert not lua.PLACEHOLDER.search(text), name
        assert "--#include" not in text, name


def test_the_module_names_are_the_loaded_scripts() -> None:
    assert lua.load("buckets") == lua.BUCKETS and lua.load("read") == lua.READ
    assert lua.load("union_roots") == unionfind.UNION_ROOTS and "--#include" not in unionfind.FORGET_IDS


def test_the_layout_constants_in_the_scripts_are_pythons() -> None:
    assert f"local REFUSED, FULL = {REFUSED_BIT}, {FULL_BIT}\n" in lua.BUCKETS
    codes = ", ".join(str(op.value[0]) for op in (Op.JOIN, Op.REJOIN, Op.LEAVE, Op.END))
    assert f"local JOIN, REJOIN, LEAVE, END = {codes}\n" in lua.BUCKETS
    assert f"if op == '{Op.CHECK_WRITE.value.decode()}' then" in lua.RECORD_CAS
    assert f"fields[i] == '{DOC_FIELD.decode()}'" in lua.READ
    assert "'\\255\\254dedupd'" in lua.READ  # keys.INFLIGHT_SENTINEL


def test_the_package_data_ships_the_scripts() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "index/scripts/*.lua" in pyproject["tool"]["setuptools"]["package-data"]["dedupd"]


def test_the_refused_bit_on_the_server_is_pythons(r: redis.Redis) -> None:
    """A bucket that took its one new member of the call refuses the next join: its hit comes back with
    REFUSED_BIT set, and Hits.of reads it as refused."""
    r.flushdb()
    r.hset("b:0", b"f000", struct.pack("<3I", 1000, 1001, 1002))  # crowded: a join of it is a hit
    ops = Op.JOIN.value + Op.END.value + Op.JOIN.value + Op.END.value
    args = argv.Buckets(
        ops=ops,
        key_index=struct.pack("<2I", 1, 1),
        fields=b"f000f000",
        ids=struct.pack("<2I", 1, 2),
        names="b:0",
        ends=struct.pack("<2I", 0, 3),
        full=100,
        fresh=1,
    )
    reply = r.register_script(lua.BUCKETS)(keys=[], args=args.argv())
    assert list(struct.unpack("<2I", reply[-1])) == [1, 2 + REFUSED_BIT]
    bucket_ops = BucketOps(
        [], ["b:0"], np.zeros(2, np.int64), np.zeros(2, np.uint32), np.zeros(2, np.uint32), np.arange(2)
    )
    hits = Hits.of(bucket_ops, np.arange(2, dtype=np.int64), reply[-1], 0)
    assert hits.refused.tolist() == [False, True] and hits.write.tolist() == [0, 1]


def test_the_document_id_rule_is_one_on_both_sides(r: redis.Redis) -> None:
    """The in-flight registry (doc_of in _registry.lua) records an entry under keys.entry_doc's id: none for
    an entry without an id, with an empty one or one longer than the bound."""
    r.flushdb()
    keys = Keys("t")
    stream = ConsumerStream(r, keys, "c1", max_id_bytes=4)
    r.xgroup_create(keys.docs, "dedupd", id="0", mkstream=True)
    entries = [
        {b"id": b"abcd"},
        {b"id": b"abcde"},
        {b"id": b""},
        {b"text": b"x"},
        {b"text": b"y", b"id": b"q"},
    ]
    for fields in entries:
        r.xadd(keys.docs, fields)
    got = stream.read_new(10, 0)
    assert len(got) == len(entries)
    recorded = {k for k in r.hkeys(keys.inflight) if not k.startswith(b"\xff")}
    assert recorded == {entry_doc(fields, 4) for _, fields in got}
    assert recorded == {b"abcd", b"", b"q"}
    assert [stream.doc_field(fields) for _, fields in got] == [b"abcd", b"", b"", b"", b"q"]
