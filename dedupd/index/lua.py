"""Server-side Lua scripts. Each touches keys of one hash slot only (Redis Cluster safe).

Layouts shared with Python come from Python: the record header (record.HEADER) and the bucket op codes
(:class:`Op`) are interpolated into the scripts' text, so the two sides cannot drift apart. The union-find
scripts live in unionfind.py.
"""

from __future__ import annotations

from enum import Enum

from dedupd.index.keys import INFLIGHT_SENTINEL
from dedupd.index.record import HEADER, HEADER_FIELDS


class Op(bytes, Enum):
    """One-byte op codes of the BUCKETS script (one per record check or bucket change; see BUCKETS)."""

    CHECK_WRITE = b"c"  # check the record is still the one read, then write the new one
    CHECK_DELETE = b"x"  # check, then delete it
    CHECK = b"k"  # check only
    JOIN = b"a"  # join a bucket and read the others in it
    REJOIN = b"j"  # the same, but a document already in the bucket reads only the ones that joined before it
    LEAVE = b"r"  # leave a bucket
    END = b"d"  # end of a document


def _byte(op: Op) -> int:
    return op.value[0]


# Stream ids 'ms-seq' compared in Lua (ms < 2**53 is exact in a Lua number).
STREAM_ID = """
local function sid(s)
  local ms, seq = string.match(s, '^(%d+)-(%d+)')  -- a tombstone is 'ms-seq n'
  return tonumber(ms or 0), tonumber(seq or 0)
end
local function newer(a, b)  -- a > b
  local am, as = sid(a)
  local bm, bs = sid(b)
  if am ~= bm then return am > bm end
  return as > bs
end
"""

# KEYS: fwd, seq, tombstones.  ARGV: triples (mode, id, entry id), mode "a" = get or assign, "g" = get only.
# Returns per id: n (existing), -n (newly assigned), 0 (unknown: get only, or a tombstone at least as new as
# the entry), then the id's tombstone ('<version> <n>', '' = none). A deleted id is not re-created by an entry older
# than its delete.
RESOLVE_IDS = (
    STREAM_ID
    + """
local out = {}
for i = 1, #ARGV, 3 do
  local mode, id, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local n = redis.call('HGET', KEYS[1], id)
  local tomb = redis.call('HGET', KEYS[3], id) or ''
  if n then
    out[#out + 1] = tonumber(n)
  elseif mode == 'a' and (tomb == '' or newer(entry, tomb)) then
    n = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[1], id, n)
    out[#out + 1] = -n
  else
    out[#out + 1] = 0
  end
  out[#out + 1] = tomb
end
return out
"""
)

# KEYS: stream, seen (a sorted set in the stream's slot).
# ARGV: now_ms, maxlen, ttl_ms, then per entry: its marker, its field count n, and n field/value pairs.
# Appends each entry once per marker (a redelivered input entry emits nothing new), in order, the stream
# capped at about maxlen; markers older than ttl_ms expire. One call per batch and stream.
_EMIT = """
local now, maxlen = ARGV[1], ARGV[2]
local i, n = 4, 0
while i <= #ARGV do
  local count = tonumber(ARGV[i + 1])
  if not redis.call('ZSCORE', KEYS[2], ARGV[i]) then  -- the marker after the entry: a failing XADD leaves none
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', unpack(ARGV, i + 2, i + 1 + 2 * count))
    redis.call('ZADD', KEYS[2], now, ARGV[i])
    n = n + 1
  end
  i = i + 2 + 2 * count
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(now) - tonumber(ARGV[3]))
"""

# Alerts, baskets, dead letters: _EMIT; returns how many entries were appended.
EMIT_MANY = _EMIT + "return n\n"

# A query's reply stream: _EMIT, then both keys expire ttl_ms after the last verdict (an idle reply stream goes).
REPLY = (
    _EMIT
    + """
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[3])
return n
"""
)


def _entry_of() -> str:
    """Lua: the input entry id stored in a packed record (record.py: the header, the signature of num_perm
    uint32 values, then the id, the tail and the input entry id)."""
    perm, n_id, n_tail, n_in = (
        HEADER_FIELDS.index(f) + 1 for f in ("num_perm", "id_len", "tail_len", "entry_len")
    )
    return f"""
local function entry_of(blob)
  if not blob then return '' end
  local h = {{struct.unpack('{HEADER.format}', blob)}}
  local at = {HEADER.size + 1} + 4 * h[{perm}] + h[{n_id}] + h[{n_tail}]
  return string.sub(blob, at, at + h[{n_in}] - 1)
end
"""


ENTRY_OF = _entry_of()

# KEYS: records.  Returns each record's input entry id ('' = no record): the versions, without the records.
VERSIONS = (
    ENTRY_OF
    + """
local out = {}
for i = 1, #KEYS do out[i] = entry_of(redis.call('GET', KEYS[i])) end
return out
"""
)

# The position of a member (a 4-byte id) in a bucket's packed value, nil when it is not there.
_FIND_MEMBER = """
local sfind = string.find
local function find(v, id)
  local from = 1
  while true do
    local s = sfind(v, id, from, true)
    if not s then return nil end
    if (s - 1) % 4 == 0 then return s end
    from = s + 1
  end
end
"""

# Band buckets: each bucket is a field (the low 32 bits of the band hash; the hash key holds its top bits)
# of a Redis hash holding, as its value, the packed little-endian uint32 ids of the documents in it. A
# document's record is checked and written in the same call, so that two consumers changing one document
# cannot interleave.
# ARGV[1]: one op code per op (see Op).
# ARGV[2]: per JOIN/REJOIN/LEAVE op, its bucket hash index (uint32 LE, 1-based).  ARGV[3]: per such op, the
# field (4 bytes).  ARGV[4]: per such op, the id (4 bytes).  ARGV[5]: per CHECK* op, the record's key index
# in KEYS (uint32 LE).  ARGV[7]: '' when KEYS holds the bucket hashes (KEYS[i] = bucket hash i; Redis
# Cluster, one slot per call); else the bucket hash names are concatenated in ARGV[6] and ARGV[7] holds 0
# and the end of each name (uint32 LE): bucket hash i is ARGV[6][ends[i]+1 .. ends[i+1]] (single Redis: two
# arguments instead of thousands of keys to pack and parse per batch).
# ARGV[8]: the most members a bucket takes (a full bucket is read but not joined: its members already
# collide in that band, and the document is found through them).
# ARGV[9]: the members of one cluster a bucket keeps (bounds.KEPT_PER_CLUSTER): a join of a bucket that held
# as many already is a hit (it may crowd its cluster; see the reply).
# ARGV[10]: the most new members a bucket takes in this call ('0': no such bound; one more in a bucket the
# call made: its first member counts as there before, as it is read by the later joins); a JOIN beyond them is
# refused, a hit marked so: once the batch is verified lua.EVICT puts the document in (it is the newest of
# its cluster there, or it has no cluster) or not (the bucket keeps newer ones of its cluster). A batch of
# copies thus adds a few members to their crowded buckets, not one each until they are full.
# ARGV[11], ARGV[12], ...: per CHECK* op, the input entry id the record was read with ('' = no record) and
# the new record ('' for CHECK_DELETE/CHECK).
# A JOIN reads the members the bucket had before this call: the documents of the batch see each other in
# the batch itself (processor: the nearest earlier ones with a band hash in common), so that a batch of
# copies costs each of them the few members kept from before, not everything the batch put there.
# A REJOIN (a redelivered document) reads the members that joined before it, or when it is not in the
# bucket any more (evicted: lua.EVICT) the members with a smaller integer id (created before it).
# Returns one string per END: the packed ids found in the buckets that document joined (before it), or
# '!' when its record had changed since it was read (nothing of that document was written); then one more
# string: the positions (uint32 LE, 1-based among the call's JOIN/REJOIN/LEAVE ops; the top bit set for a
# refused JOIN) of the hits: the joins of a bucket that held ARGV[9] members or more (where the document may
# crowd its cluster: lua.EVICT).
# Each bucket holds at most ARGV[8] members, so a call's work is bounded by its ops, whatever the size of
# a cluster.
BUCKETS = (
    ENTRY_OF
    + _FIND_MEMBER
    + f"""
local ops, kidx, fields, ids, ckidx = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local blob, ends, full, crowd = ARGV[6], ARGV[7], 4 * tonumber(ARGV[8]), 4 * tonumber(ARGV[9])
local fresh = 4 * tonumber(ARGV[10])
local REFUSED = 2147483648
local unpack4, pack4, sub, byte, call = struct.unpack, struct.pack, string.sub, string.byte, redis.call
local named = ends ~= ''
local JOIN, REJOIN, LEAVE, END = {_byte(Op.JOIN)}, {_byte(Op.REJOIN)}, {_byte(Op.LEAVE)}, {_byte(Op.END)}
local WRITE, DELETE = {_byte(Op.CHECK_WRITE)}, {_byte(Op.CHECK_DELETE)}
local out, acc, n_acc = {{}}, {{}}, 0
local hits, n_hits = {{}}, 0  -- the hits' positions, packed once at the end (a flood's copies hit every join)
local before = {{}}  -- hash name -> field -> bytes of the members it had before this call (a JOIN reads only those)
-- hash name -> field -> the bucket's value as this call left it, for the buckets this call read (a flood's
-- copies join the same buckets: one HSETNX and HGET per bucket and call, not per copy); not for the buckets
-- it made (a batch of different documents would only fill the table)
local known = {{}}
local names = {{}}  -- bucket hash index -> its name (single Redis)
local j, c, skip = 0, 0, false
local id
for i = 1, #ops do
  local op = byte(ops, i)
  if op == JOIN or op == REJOIN or op == LEAVE then
    local at4 = 4 * j
    j = j + 1
    if not skip then
      local b1, b2, b3, b4 = byte(kidx, at4 + 1, at4 + 4)  -- the key's index (uint32 LE)
      local k = b1 + 256 * b2 + 65536 * b3 + 16777216 * b4
      local key
      if named then  -- (a flood's copies use the same few names: cut once per call)
        key = names[k]
        if not key then
          local a, b = unpack4('<I4I4', ends, 4 * k - 3)
          key = sub(blob, a + 1, b)
          names[k] = key
        end
      else
        key = KEYS[k]
      end
      local field = sub(fields, at4 + 1, at4 + 4)
      if not id then id = sub(ids, at4 + 1, at4 + 4) end  -- one document's ops share its id
      local kf = known[key]
      if op ~= LEAVE then
        local v = kf and kf[field]
        if not v and call('HSETNX', key, field, id) == 0 then  -- the bucket exists: read it
          v = call('HGET', key, field)
          if not kf then kf = {{}}; known[key] = kf end
          kf[field] = v
        end
        if v then  -- join it
          local at = find(v, id)
          local bk = before[key]  -- (a bucket this call made: its first member is read too)
          if not bk then bk = {{}}; before[key] = bk end
          local old = bk[field]
          if not old then old = #v; bk[field] = old end
          local refused = not at and op == JOIN and #v < full and fresh > 0 and #v - old >= fresh
          if refused then
            n_hits = n_hits + 1; hits[n_hits] = j + REFUSED
          elseif #v >= crowd then
            n_hits = n_hits + 1; hits[n_hits] = j
          end
          n_acc = n_acc + 1
          if at then  -- already in it: JOIN reads the others, REJOIN only the ones that joined before it
            acc[n_acc] = op == JOIN and (sub(v, 1, at - 1) .. sub(v, at + 4)) or sub(v, 1, at - 1)
          elseif op == JOIN then  -- the members of this call's batch it sees in the batch itself
            acc[n_acc] = sub(v, 1, old)
            if #v < full and not refused then v = v .. id; call('HSET', key, field, v); kf[field] = v end
          else  -- REJOIN of a document no longer in it (a newer one evicted it): only the older ids
            local own, older = unpack4('<I4', id), {{}}
            for p = 1, #v, 4 do
              if unpack4('<I4', v, p) < own then older[#older + 1] = sub(v, p, p + 3) end
            end
            acc[n_acc] = table.concat(older)
            if #v < full then v = v .. id; call('HSET', key, field, v); kf[field] = v end
          end
        end
      else
        local v = call('HGET', key, field)
        if v then
          local at = find(v, id)
          if at then
            local rest = sub(v, 1, at - 1) .. sub(v, at + 4)
            if rest == '' then call('HDEL', key, field) else call('HSET', key, field, rest) end
            if kf then kf[field] = nil end  -- (read again when joined again)
            local bk = before[key]
            if not bk then bk = {{}}; before[key] = bk end
            local old = bk[field]
            if not old then bk[field] = #rest elseif at <= old then bk[field] = old - 4 end
          end
        end
      end
    end  -- skip: this document's record changed: leave its buckets alone
  elseif op == END then
    if skip then out[#out + 1] = '!' else out[#out + 1] = table.concat(acc) end
    if n_acc > 0 then acc, n_acc = {{}}, 0 end
    skip = false
    id = nil
  else
    local key = KEYS[unpack4('<I4', ckidx, 4 * c + 1)]
    local expected, record = ARGV[11 + 2 * c], ARGV[12 + 2 * c]
    c = c + 1
    if entry_of(call('GET', key)) ~= expected then
      skip = true
    elseif op == WRITE then
      call('SET', key, record)
    elseif op == DELETE then
      call('DEL', key)
    end
  end
end
local packed = {{}}
for s = 1, n_hits, 1000 do  -- (unpack's arguments go on Lua's stack: a thousand at a time)
  local e = math.min(s + 999, n_hits)
  packed[#packed + 1] = pack4('<' .. string.rep('I4', e - s + 1), unpack(hits, s, e))
end
out[#out + 1] = table.concat(packed)
return out
"""
)

# The record check of BUCKETS alone, for Redis Cluster (a record and its buckets live in other slots; see
# cluster_records.py). KEYS: the record, its leaving key (keys.leaving: same slot).  ARGV: op (an Op CHECK* code),
# the entry id it was read with, the new record, the packed band hashes of the buckets this write leaves ('' =
# none). Returns {0, ''} when the record changed since it was read (nothing written); else {1, the band hashes
# earlier writes left to leave ('' = none)}, and a write adds its own to them.
RECORD_CAS = (
    ENTRY_OF
    + f"""
if entry_of(redis.call('GET', KEYS[1])) ~= ARGV[2] then return {{0, ''}} end
local left = redis.call('GET', KEYS[2]) or ''
if ARGV[1] == '{Op.CHECK_WRITE.value.decode()}' then
  redis.call('SET', KEYS[1], ARGV[3])
  if ARGV[4] ~= '' then redis.call('SET', KEYS[2], left .. ARGV[4]) end
elseif ARGV[1] == '{Op.CHECK_DELETE.value.decode()}' then redis.call('DEL', KEYS[1]) end
return {{1, left}}
"""
)

# After the buckets of a RECORD_CAS write are written (Redis Cluster). KEYS: the record, its leaving key.
# ARGV: the version (input entry id) the write left the record at, '1' to delete the record (a delete).
# Unless the record changed since: deletes it if asked, and forgets the buckets to leave (they are left).
RECORD_SETTLE = (
    ENTRY_OF
    + """
if entry_of(redis.call('GET', KEYS[1])) ~= ARGV[1] then return 0 end
if ARGV[2] == '1' then redis.call('DEL', KEYS[1]) end
redis.call('DEL', KEYS[2])
return 1
"""
)

# Older members of a cluster leave a bucket to newer ones (bounds.eviction_rows), and documents the bucket
# refused (lua.BUCKETS) are put in when they are among the newest of their cluster (a document without
# a cluster: its own, of one member).
# KEYS: bucket hashes.  Per row (one per bucket, cluster and document of the batch that joined it):
# ARGV[1]: its bucket hash's index in KEYS (uint32 LE, 1-based); ARGV[2]: the field (4 bytes); ARGV[3]: the
# cluster's index g (uint32 LE, 1-based); ARGV[4]: the document (4 bytes). ARGV[5]: the members of a
# cluster a bucket keeps; ARGV[6]: the most members a bucket takes; ARGV[6 + g]: the cluster's known
# members (4 bytes each). The rows of one bucket and cluster are consecutive. Of the cluster's known
# members in the bucket and the rows' documents, the ARGV[5] newest (largest id) stay, the others leave,
# and a row's document that a full bucket refused takes the place of one that left. Members not known to
# be of the cluster are left alone. Returns how many left.
EVICT = """
local kidx, fields, groups, docs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local keep, full = tonumber(ARGV[5]), 4 * tonumber(ARGV[6])
local unpack4, sub, call = struct.unpack, string.sub, redis.call
local sets, n = {}, 0
local function members_of(g)
  local s = sets[g]
  if not s then
    s = {}
    local ids = ARGV[6 + g]
    for p = 1, #ids, 4 do s[sub(ids, p, p + 3)] = true end
    sets[g] = s
  end
  return s
end
local function settle(key, field, s, held)
  local v = call('HGET', key, field)
  if not v then return end
  local known, seen = {}, {}
  for p = 1, #v, 4 do
    local m = sub(v, p, p + 3)
    if s[m] and not seen[m] then known[#known + 1] = m; seen[m] = true end
  end
  for _, m in ipairs(held) do
    if not seen[m] then known[#known + 1] = m; seen[m] = true end
  end
  if #known > keep then  -- the keep newest (largest ids) first, by selection (keep is small: no sort)
    local num = {}
    for i = 1, #known do num[i] = unpack4('<I4', known[i]) end
    for i = 1, keep do
      local top = i
      for k = i + 1, #known do if num[k] > num[top] then top = k end end
      known[i], known[top], num[i], num[top] = known[top], known[i], num[top], num[i]
    end
  end
  local kept, out, present, changed = {}, {}, {}, false
  for i = 1, math.min(keep, #known) do kept[known[i]] = true end
  for p = 1, #v, 4 do
    local m = sub(v, p, p + 3)
    if seen[m] and not kept[m] then n = n + 1; changed = true else out[#out + 1] = m; present[m] = true end
  end
  for i = 1, math.min(keep, #known) do
    if not present[known[i]] and 4 * #out < full then out[#out + 1] = known[i]; changed = true end
  end
  if changed then call('HSET', key, field, table.concat(out)) end
end
local key, field, group, held = nil, nil, nil, {}
for at = 1, #fields, 4 do
  local k, f, g = KEYS[(unpack4('<I4', kidx, at))], sub(fields, at, at + 3), (unpack4('<I4', groups, at))
  if k ~= key or f ~= field or g ~= group then
    if key then settle(key, field, members_of(group), held) end
    key, field, group, held = k, f, g, {}
  end
  held[#held + 1] = sub(docs, at, at + 3)
end
if key then settle(key, field, members_of(group), held) end
return n
"""

# KEYS: the input stream.  ARGV: per entry, its field count n, then n field/value pairs.
# XADDs every entry (ids chosen by Redis); returns how many.
XADD_MANY = """
local i, n = 1, 0
while i <= #ARGV do
  local count = tonumber(ARGV[i])
  local args = {'XADD', KEYS[1], '*'}
  for j = i + 1, i + 2 * count do args[#args + 1] = ARGV[j] end
  redis.call(unpack(args))
  i = i + 1 + 2 * count
  n = n + 1
end
return n
"""


def _lua_bytes(raw: bytes) -> str:
    """A Lua string literal's body for any bytes (decimal escapes)."""
    return "".join(f"\\{b}" for b in raw)


# The in-flight registry. KEYS[1]: the input stream; KEYS[2]: a hash, document id -> its in-flight entry ids
# (space-separated; '' is the field of entries without an acceptable id); KEYS[3]: how many entries it holds.
# Lua helpers of the scripts below.
_REGISTRY = (
    f"""
-- a field with a long value keeps the hash in Redis's hashtable encoding: a small hash is a listpack, which
-- every lookup scans (HMGET of a batch's documents took ~1.4 us a field instead of ~0.1)
local function keep_hashtable()
  redis.call('HSETNX', KEYS[2], '{_lua_bytes(INFLIGHT_SENTINEL)}', '{"x" * 80}')
end
"""
    + """
local function add(eid, doc)  -- 1 when newly recorded
  if redis.call('HSETNX', KEYS[2], doc, eid) == 1 then return 1 end  -- the usual case: its only entry
  local have = redis.call('HGET', KEYS[2], doc)
  for x in string.gmatch(have, '%S+') do if x == eid then return 0 end end
  redis.call('HSET', KEYS[2], doc, have .. ' ' .. eid)
  return 1
end
local function remove(eid, doc)  -- 1 when it was recorded
  local have = redis.call('HGET', KEYS[2], doc)
  if not have then return 0 end
  local rest, found = {}, 0
  for x in string.gmatch(have, '%S+') do if x ~= eid then rest[#rest + 1] = x else found = 1 end end
  if found == 0 then return 0 end
  if #rest == 0 then redis.call('HDEL', KEYS[2], doc) else redis.call('HSET', KEYS[2], doc, table.concat(rest, ' ')) end
  return 1
end
local function doc_of(fields, maxid)
  for i = 1, #fields, 2 do
    if fields[i] == 'id' then
      local doc = fields[i + 1]
      if #doc > 0 and #doc <= maxid then return doc end
      return ''
    end
  end
  return ''
end
-- Make the registry hold the group's pending entries (at most `limit` of them): cheap when it already does
-- (one XPENDING summary and one GET); else it is rebuilt from the pending entries (entries another consumer
-- has read and not yet recorded, read by a plain XREADGROUP, or acknowledged behind its back).
local function reconcile(group, maxid, limit)
  local pending = tonumber(redis.call('XPENDING', KEYS[1], group)[1])
  if pending == tonumber(redis.call('GET', KEYS[3]) or '0') then return 0 end
  redis.call('DEL', KEYS[2])
  keep_hashtable()
  local n = 0
  for _, p in ipairs(redis.call('XPENDING', KEYS[1], group, '-', '+', limit)) do
    local got = redis.call('XRANGE', KEYS[1], p[1], p[1])
    n = n + add(p[1], got[1] and doc_of(got[1][2], maxid) or '')
  end
  redis.call('SET', KEYS[3], n)
  return 1
end
"""
)

# KEYS: the input stream, its in-flight hash, its in-flight count.  ARGV: group, consumer, mode, from, count,
# budget, max_entry, keep, the longest accepted id, the cut field's name. Reads entries for the consumer, bounded
# in bytes (an entry's size: its field names and values together): an entry larger than max_entry comes back
# cut to about `keep` bytes (its `id` first, then the other fields in order) with the cut field holding its full
# size, so that no entry reaches the daemon whole when it is larger than the bound.
# mode 'new': new entries (XREADGROUP '>'), at most `count` and, counting each at most max_entry, at most
#   `budget` bytes together; recorded as in flight at once. Never blocks.
# mode 'own': the consumer's own pending entries after the id `from` (at most `count`); a deleted one as
#   (id, false).
# mode 'claim': claims the pending entry `from` (XCLAIM, idle 0) and returns it.
READ = (
    _REGISTRY
    + """
local group, consumer, mode, from = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local count, budget, maxentry, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local maxid, cutname = tonumber(ARGV[9]), ARGV[10]
local function bounded(fields)  -- the fields (or cut ones) and the size they count for
  local size = 0
  for i = 1, #fields do size = size + #fields[i] end
  if size <= maxentry then return fields, size end
  local out, room = {}, keep
  local function put(k, v)
    if #k > room then return end
    local n = math.min(#v, room - #k)
    out[#out + 1] = k
    out[#out + 1] = string.sub(v, 1, n)
    room = room - #k - n
  end
  for i = 1, #fields, 2 do if fields[i] == 'id' then put(fields[i], fields[i + 1]) break end end
  for i = 1, #fields, 2 do if fields[i] ~= 'id' then put(fields[i], fields[i + 1]) end end
  out[#out + 1] = cutname
  out[#out + 1] = tostring(size)
  return out, maxentry
end
local out = {}
local function take(entries)
  local used, n = 0, 0
  for _, e in ipairs(entries or {}) do
    if e[2] then
      local fields, size = bounded(e[2])
      out[#out + 1] = {e[1], fields}
      used = used + size
      if mode == 'new' then n = n + add(e[1], doc_of(fields, maxid)) end
    else
      out[#out + 1] = {e[1], false}
    end
  end
  return used, n
end
if mode == 'new' then
  keep_hashtable()
  local used, added = 0, 0
  while #out < count do
    local k = math.min(count - #out, math.floor((budget - used) / maxentry))
    if k < 1 then break end
    local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', k, 'STREAMS', KEYS[1], '>')
    if not got then break end
    local size, n = take(got[1][2])
    used, added = used + size, added + n
    if #got[1][2] < k then break end
  end
  if added > 0 then redis.call('INCRBY', KEYS[3], added) end
elseif mode == 'own' then
  local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', KEYS[1], from)
  if got then take(got[1][2]) end
else
  take(redis.call('XCLAIM', KEYS[1], group, consumer, 0, from))
end
return out
"""
)

# KEYS: the input stream, its in-flight hash, its in-flight count.  ARGV: group, the longest accepted id, the
# most pending entries to look at, then document ids. Reconciles the registry with the group's pending entries
# if they differ, then returns each document's in-flight entries (space-separated, or false): atomically, so
# that every entry delivered before this moment is in the answer.
LOOKUP_INFLIGHT = (
    _REGISTRY
    + """
reconcile(ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]))
local out = {}
for i = 4, #ARGV, 1000 do  -- unpack takes a few thousand values at most
  local part = redis.call('HMGET', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  for _, v in ipairs(part) do out[#out + 1] = v end
end
return out
"""
)

# KEYS: the input stream, its in-flight hash, its in-flight count.  ARGV: group, then pairs (entry id, its
# document id or ''). Acknowledges the entries and removes them from the registry, atomically.
# KEYS: the input stream, its in-flight hash, its in-flight count.  ARGV: group, then pairs (entry id, its
# document id): records that block an entry for long. Removes those no longer pending in the group (an entry
# deleted from the stream and acknowledged without its document). Returns how many it removed.
PRUNE_INFLIGHT = (
    _REGISTRY
    + """
local n = 0
for i = 2, #ARGV, 2 do
  if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1) == 0 then n = n + remove(ARGV[i], ARGV[i + 1]) end
end
return n
"""
)

ACK = (
    _REGISTRY
    + """
local ids, acked = {}, 0
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  remove(ARGV[i], ARGV[i + 1])
end
for i = 1, #ids, 1000 do
  acked = acked + redis.call('XACK', KEYS[1], ARGV[1], unpack(ids, i, math.min(i + 999, #ids)))
end
-- the count follows the pending entries (a too low count only makes the next lookup rebuild the registry)
if acked > 0 then redis.call('DECRBY', KEYS[3], acked) end
return #ids
"""
)


def _meta_scripts() -> tuple[str, str, str, str, str]:
    """The rebuild protocol on the meta hash (KEYS[1]), the rebuild lease (KEYS[2]) and the pause key
    (KEYS[3]), all in the meta hash's slot: begin, pause, switch and abort are compare-and-set on the
    lease's token, so two rebuilds cannot both run and an aborted one cannot switch."""
    from dedupd.index.keys import Meta

    m = {f.name.lower(): f.value for f in Meta}
    nexts = f"'{m['next_spec']}', '{m['next_gen']}', '{m['next_mode']}', '{m['next_cut']}'"
    # ARGV: token, lease_ms, target spec (JSON), mode, cut. Returns {outcome, detail}.
    begin = f"""
local spec = redis.call('HGET', KEYS[1], '{m["spec"]}')
if not spec then return {{'none', ''}} end
local owner = redis.call('GET', KEYS[2])
if owner and owner ~= ARGV[1] then return {{'running', owner}} end
local nxt = redis.call('HGET', KEYS[1], '{m["next_spec"]}')
if nxt then
  if nxt ~= ARGV[3] then return {{'other', nxt}} end
  redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
  return {{'resumed', redis.call('HGET', KEYS[1], '{m["next_mode"]}') or ''}}
end
if spec == ARGV[3] then return {{'same', ''}} end
-- generation numbers only go up: an aborted rebuild's number is never used again
local gen = math.max(tonumber(redis.call('HGET', KEYS[1], '{m["gen"]}') or '0'),
                     tonumber(redis.call('HGET', KEYS[1], '{m["last_gen"]}') or '0')) + 1
redis.call('HSET', KEYS[1], '{m["last_gen"]}', gen)
redis.call('HSET', KEYS[1], '{m["next_spec"]}', ARGV[3], '{m["next_gen"]}', gen, '{m["next_mode"]}', ARGV[4],
           '{m["next_cut"]}', ARGV[5])
redis.call('SET', KEYS[2], ARGV[1], 'PX', ARGV[2])
return {{'began', ''}}
"""
    # ARGV: token, lease_ms. Renews the lease if it is still this rebuild's: 1, else 0 (aborted or taken over).
    renew = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""
    # ARGV: token, pause_ms, the generation being switched to. Pauses the daemons (1), or 0 if not the owner.
    pause = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[2])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
"""
    # ARGV: token. Makes the next generation current and lifts the pause: 1; 0 not the owner (aborted);
    # -1 the pause expired (daemons may have written since: pause again and re-check).
    switch = f"""
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return 0 end
local nspec = redis.call('HGET', KEYS[1], '{m["next_spec"]}')
local ngen = redis.call('HGET', KEYS[1], '{m["next_gen"]}')
if not nspec or not ngen then return 0 end
if redis.call('GET', KEYS[3]) ~= ngen then return -1 end
redis.call('HSET', KEYS[1], '{m["spec"]}', nspec, '{m["gen"]}', ngen)
redis.call('HDEL', KEYS[1], {nexts})
redis.call('DEL', KEYS[3])
return 1
"""
    # ARGV: none. Forgets an unfinished rebuild: returns the generation it was building, or false.
    abort = f"""
local ngen = redis.call('HGET', KEYS[1], '{m["next_gen"]}')
redis.call('HDEL', KEYS[1], {nexts})
redis.call('DEL', KEYS[2], KEYS[3])
return ngen
"""
    return begin, renew, pause, switch, abort


REBUILD_BEGIN, REBUILD_RENEW, REBUILD_PAUSE, REBUILD_SWITCH, REBUILD_ABORT = _meta_scripts()
