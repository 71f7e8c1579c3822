"""Server-side Lua scripts: one file each under ``scripts/<name>.lua``, loaded by name with :func:`load`.

Each script touches keys of one hash slot only (Redis Cluster safe). A script file begins with a header
comment that names every ``KEYS[i]`` and ``ARGV[i]`` (``ARGV[i..]``: the rest, read by index), then binds
them to named locals; their Python side builds the arguments in that order (argv.py: one function per
script). Helpers several scripts share are fragments, ``scripts/_<name>.lua``, included by a line
``--#include _<name>``; a fragment reads no argument by a fixed index (``KEYS[1]``), only the locals its
header names.

Layouts shared with Python come from Python: a placeholder ``{{NAME}}`` in a file is filled from the
script's entry of :data:`LAYOUT` (the record header of record.py, the op codes of :class:`Op`, the refused
bit :data:`REFUSED_BIT`, the meta hash's fields of keys.py, the document id field, ...), so the two sides
cannot drift apart; every placeholder must be given, and every value given must be used.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import Enum
from importlib import resources

from dedupd.index.keys import DOC_FIELD, INFLIGHT_SENTINEL, Meta
from dedupd.index.record import HEADER, HEADER_FIELDS


class Op(bytes, Enum):
    """One-byte op codes of the BUCKETS script (one per record check or bucket change; see buckets.lua)."""

    CHECK_WRITE = b"c"  # check the record is still the one read, then write the new one
    CHECK_DELETE = b"x"  # check, then delete it
    CHECK = b"k"  # check only
    JOIN = b"a"  # join a bucket and read the others in it
    REJOIN = b"j"  # the same, but a document already in the bucket reads only the ones that joined before it
    LEAVE = b"r"  # leave a bucket
    END = b"d"  # end of a document


# a hit's position (uint32) with this bit set: the bucket refused the document (buckets.lua; buckets.Hits)
REFUSED_BIT = 1 << 31
# ... with this bit set: the bucket was full and the document did not join it (displace.lua may put it in)
FULL_BIT = 1 << 30

Value = int | str | bytes  # a placeholder's value: a number, Lua source text, or a Lua string literal's bytes


def lua_bytes(raw: bytes) -> str:
    r"""The body of a Lua string literal (between single quotes) holding ``raw``: printable ASCII as it is,
    any other byte as a three-digit decimal escape.

    >>> print(lua_bytes(b"id"), lua_bytes(b"\xffa'1"))
    id \255a\0391
    """
    return "".join(chr(b) if 32 <= b < 127 and chr(b) not in "'\"\\" else f"\\{b:03d}" for b in raw)


def _ops(*names: str) -> dict[str, Value]:
    """Op codes as Lua numbers (``OP_JOIN``: the byte of Op.JOIN), as BUCKETS compares them."""
    return {f"OP_{name}": Op[name].value[0] for name in names}


def _op_chars(*names: str) -> dict[str, Value]:
    """Op codes as the body of a Lua string (``OP_CHECK_WRITE_CHAR``), as record_cas compares them."""
    return {f"OP_{name}_CHAR": Op[name].value for name in names}


def _meta(*fields: Meta) -> dict[str, Value]:
    """Fields of the meta hash (``META_NEXT_GEN``: keys.Meta.NEXT_GEN's name in the hash)."""
    return {f"META_{f.name}": f.value for f in fields}


def _record() -> dict[str, Value]:
    """The record header as _entry_of.lua reads it: its struct format, the 1-based position after it, and the
    1-based position in it of the signature length and of the id, tail and input entry id lengths."""
    at = {f: HEADER_FIELDS.index(f) + 1 for f in ("num_perm", "id_len", "tail_len", "entry_len")}
    return {
        "RECORD_HEADER": HEADER.format,
        "RECORD_BODY": HEADER.size + 1,
        "RECORD_NUM_PERM": at["num_perm"],
        "RECORD_ID_LEN": at["id_len"],
        "RECORD_TAIL_LEN": at["tail_len"],
        "RECORD_ENTRY_LEN": at["entry_len"],
    }


_REGISTRY: dict[str, Value] = {"INFLIGHT_SENTINEL": INFLIGHT_SENTINEL, "DOC_ID_FIELD": DOC_FIELD}
_REBUILD = (Meta.SPEC, Meta.GEN, Meta.NEXT_SPEC, Meta.NEXT_GEN, Meta.NEXT_MODE, Meta.NEXT_CUT)

#: Per script (the file's name): the values of its placeholders and those of the fragments it includes.
LAYOUT: dict[str, Mapping[str, Value]] = {
    # streams and the in-flight registry
    "read": _REGISTRY,
    "lookup_inflight": _REGISTRY,
    "prune_inflight": _REGISTRY,
    "ack": _REGISTRY,
    "xadd_many": {},
    # buckets, records, evictions
    "buckets": {
        **_record(),
        **_ops("JOIN", "REJOIN", "LEAVE", "END", "CHECK_WRITE", "CHECK_DELETE"),
        "REFUSED_BIT": REFUSED_BIT,
        "FULL_BIT": FULL_BIT,
    },
    "record_cas": {**_record(), **_op_chars("CHECK_WRITE", "CHECK_DELETE")},
    "record_settle": _record(),
    "versions": _record(),
    "evict": {},
    "displace": {},
    # ids and the union-find (unionfind.py)
    "resolve_ids": {},
    "release_ids": {},
    "find_roots": {},
    "union_roots": {},
    "union_live": {},
    "representatives": {},
    "forget_ids": {},
    "set_floor": {},
    "cluster_page": {},
    # the retention window (retention.py)
    "touch": {},
    "expire_claim": {},
    "expire_note": {},
    "expire_finish": {},
    # generations (generations.py)
    "rebuild_begin": _meta(*_REBUILD, Meta.LAST_GEN),
    "rebuild_renew": {},
    "rebuild_pause": {},
    "rebuild_switch": _meta(*_REBUILD),
    "rebuild_abort": _meta(Meta.NEXT_SPEC, Meta.NEXT_GEN, Meta.NEXT_MODE, Meta.NEXT_CUT),
    "owed_alerts": _meta(Meta.OWED_ALERTS),
    # outputs
    "emit_many": {},
    "reply": {},
}

PLACEHOLDER = re.compile(r"\{\{([A-Z][A-Z0-9_]*)\}\}")
INCLUDE = re.compile(r"^--#include (_[a-z0-9_]+)$", re.MULTILINE)


def source(name: str) -> str:
    """The text of ``scripts/<name>.lua`` as it is (placeholders and includes unfilled).

    Raises:
        ValueError: when there is no such file.
    """
    if not re.fullmatch(r"_?[a-z0-9_]+", name):
        raise ValueError(f"no Lua script {name!r}: a script's name is lower case letters, digits and '_'")
    path = resources.files("dedupd.index").joinpath("scripts").joinpath(f"{name}.lua")
    if not path.is_file():
        raise ValueError(f"no Lua script {name!r} (dedupd/index/scripts/{name}.lua)")
    return path.read_text(encoding="utf-8")


def _included(name: str, seen: tuple[str, ...] = ()) -> str:
    """The text of a script or fragment with its ``--#include`` lines replaced by the fragments' text."""
    if name in seen:
        raise ValueError(f"Lua fragment {name!r} includes itself: {' -> '.join((*seen, name))}")
    return INCLUDE.sub(lambda m: _included(m.group(1), (*seen, name)).rstrip("\n"), source(name))


def render(name: str, values: Mapping[str, Value]) -> str:
    """Script ``name`` (its fragments included) with each ``{{NAME}}`` replaced by ``values[NAME]`` (bytes as
    the body of a Lua string literal).

    Raises:
        ValueError: when there is no such script, a placeholder has no value, or a value is not used.
    """
    text = _included(name)
    used = set(PLACEHOLDER.findall(text))
    missing, unused = used - values.keys(), values.keys() - used
    if missing or unused:
        raise ValueError(
            f"Lua script {name!r}: placeholders without a value {sorted(missing)}, values no placeholder "
            f"uses {sorted(unused)}"
        )

    def value(m: re.Match[str]) -> str:
        v = values[m.group(1)]
        return lua_bytes(v) if isinstance(v, bytes) else str(v)

    return PLACEHOLDER.sub(value, text)


def load(name: str) -> str:
    """The source of script ``name`` (``scripts/<name>.lua``), its layout constants filled from :data:`LAYOUT`.

    Raises:
        ValueError: for a name that is no script (a fragment is none), or a placeholder left unfilled or a
            value of LAYOUT left unused.
    """
    if name not in LAYOUT:
        raise ValueError(f"no Lua script {name!r}: the scripts are {', '.join(sorted(LAYOUT))}")
    return render(name, LAYOUT[name])


# the scripts by the names the code uses (unionfind.py loads the union-find's)
READ = load("read")
LOOKUP_INFLIGHT = load("lookup_inflight")
PRUNE_INFLIGHT = load("prune_inflight")
ACK = load("ack")
XADD_MANY = load("xadd_many")
BUCKETS = load("buckets")
RECORD_CAS = load("record_cas")
RECORD_SETTLE = load("record_settle")
VERSIONS = load("versions")
EVICT = load("evict")
DISPLACE = load("displace")
RESOLVE_IDS = load("resolve_ids")
RELEASE_IDS = load("release_ids")
TOUCH = load("touch")
EXPIRE_CLAIM = load("expire_claim")
EXPIRE_NOTE = load("expire_note")
EXPIRE_FINISH = load("expire_finish")
REBUILD_BEGIN = load("rebuild_begin")
REBUILD_RENEW = load("rebuild_renew")
REBUILD_PAUSE = load("rebuild_pause")
REBUILD_SWITCH = load("rebuild_switch")
REBUILD_ABORT = load("rebuild_abort")
OWED_ALERTS = load("owed_alerts")
EMIT_MANY = load("emit_many")
REPLY = load("reply")
