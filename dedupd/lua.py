"""Server-side Lua scripts. Each touches keys of one hash slot only (Redis Cluster safe)."""

from __future__ import annotations

# KEYS: fwd, seq.  ARGV: pairs (mode, id), mode "a" = get or assign, "g" = get only.
# Returns per id: n (existing), -n (newly assigned), 0 (unknown, get only).
RESOLVE_IDS = """
local out = {}
for i = 1, #ARGV, 2 do
  local mode, id = ARGV[i], ARGV[i + 1]
  local n = redis.call('HGET', KEYS[1], id)
  if n then
    out[#out + 1] = tonumber(n)
  elseif mode == 'a' then
    n = redis.call('INCR', KEYS[2])
    redis.call('HSET', KEYS[1], id, n)
    out[#out + 1] = -n
  else
    out[#out + 1] = 0
  end
end
return out
"""

# KEYS: fwd.  ARGV: id, n.  Forgets id -> n only if it still maps to n.
FORGET_ID = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""

# KEYS: stream, seen (a sorted set in the stream's slot).
# ARGV: now_ms, maxlen, ttl_ms, then per entry: its marker, its field count n, and n field/value pairs.
# Appends each entry once per marker (a redelivered input entry emits nothing new), in order; old markers
# expire. One call per batch and stream. Returns how many entries were appended.
EMIT_MANY = """
local now, maxlen = ARGV[1], ARGV[2]
local i, n = 4, 0
while i <= #ARGV do
  local count = tonumber(ARGV[i + 1])
  if redis.call('ZADD', KEYS[2], 'NX', now, ARGV[i]) == 1 then
    local args = {'XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*'}
    for j = i + 2, i + 1 + 2 * count do args[#args + 1] = ARGV[j] end
    redis.call(unpack(args))
    n = n + 1
  end
  i = i + 2 + 2 * count
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(now) - tonumber(ARGV[3]))
return n
"""

# KEYS: parent.  ARGV: groups "n k m1 .. mk": union n with each m; returns per group the root's integer
# id (the root is the cluster's oldest document: union by smaller integer id).
UNION_FIND = """
local function find(x)
  local root = x
  local path = {}
  while true do
    local p = redis.call('HGET', KEYS[1], root)
    if (not p) or p == root then break end
    path[#path + 1] = root
    root = p
  end
  for _, v in ipairs(path) do redis.call('HSET', KEYS[1], v, root) end
  return root
end
local out = {}
local i = 1
while i <= #ARGV do
  local n = ARGV[i]
  local k = tonumber(ARGV[i + 1])
  for j = 1, k do
    local a, b = find(n), find(ARGV[i + 1 + j])
    if a ~= b then
      if tonumber(a) < tonumber(b) then
        redis.call('HSET', KEYS[1], b, a)
      else
        redis.call('HSET', KEYS[1], a, b)
      end
    end
  end
  out[#out + 1] = tonumber(find(n))
  i = i + 2 + k
end
return out
"""

# The input entry id stored in a packed record (record.py's header, then the signature, id and tail).
_ENTRY_OF = """
local function entry_of(blob)
  if not blob then return '' end
  local _, perm, _, nid, ntail, nin = struct.unpack('<BHIIIHHI', blob)
  local at = 24 + 4 * perm + nid + ntail
  return string.sub(blob, at, at + nin - 1)
end
"""

# Band buckets: each bucket is a field (the low 32 bits of the band hash; the hash key holds its top bits)
# of a Redis hash holding, as its value,
# the packed little-endian uint32 ids of the documents in it. A document's record is checked and written
# in the same call, so that two consumers changing one document cannot interleave.
# ARGV[1]: one op code per op:
#   'c' check the record is still the one read, then write the new one; 'x' check, then delete it;
#   'k' check only; 'a' join a bucket and read the others in it; 'j' the same, but a document already in
#   the bucket reads only the ones that joined before it (an entry processed again after a crash: the
#   later ones saw it when they joined, and report the pair themselves); 'r' leave a bucket; 'd' end of
#   a document.
# ARGV[2]: per 'a'/'r' op, its bucket hash index (uint32 LE, 1-based).  ARGV[3]: per 'a'/'r' op, the
# field (4 bytes).  ARGV[4]: per 'a'/'r' op, the id (4 bytes).  ARGV[5]: per 'c'/'x'/'k' op, the record's
# key index in KEYS (uint32 LE).  ARGV[7]: '' when KEYS holds the bucket hashes (KEYS[i] = bucket hash i;
# Redis Cluster, one slot per call); else the bucket hash names are concatenated in ARGV[6] and ARGV[7]
# holds 0 and the end of each name (uint32 LE): bucket hash i is ARGV[6][ends[i]+1 .. ends[i+1]]
# (single Redis: two arguments instead of thousands of keys to pack and parse per batch).
# ARGV[8], ARGV[9], ...: per 'c'/'x'/'k' op, the input entry id the record was read with ('' = no
# record) and the new record ('' for 'x'/'k').
# Returns one string per 'd': the packed ids found in the buckets that document joined (before it), or
# '!' when its record had changed since it was read (nothing of that document was written).
BUCKETS = _ENTRY_OF + """
local ops, kidx, fields, ids, ckidx = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local blob, ends = ARGV[6], ARGV[7]
local unpack4, sub, byte, call, sfind = struct.unpack, string.sub, string.byte, redis.call, string.find
local named = ends ~= ''
local function find(v, id)
  local from = 1
  while true do
    local s = sfind(v, id, from, true)
    if not s then return nil end
    if (s - 1) % 4 == 0 then return s end
    from = s + 1
  end
end
-- op codes as bytes: a 97, j 106, r 114, d 100, c 99, x 120, k 107
local out, acc, n_acc = {}, {}, 0
local j, c, skip = 0, 0, false
local id
for i = 1, #ops do
  local op = byte(ops, i)
  if op == 97 or op == 106 or op == 114 then
    local at4 = 4 * j
    j = j + 1
    if not skip then
      local b1, b2, b3, b4 = byte(kidx, at4 + 1, at4 + 4)  -- the key's index (uint32 LE)
      local k = b1 + 256 * b2 + 65536 * b3 + 16777216 * b4
      local key
      if named then  -- a name is mostly used once per batch: no cache
        local a, b = unpack4('<I4I4', ends, 4 * k - 3)
        key = sub(blob, a + 1, b)
      else
        key = KEYS[k]
      end
      local field = sub(fields, at4 + 1, at4 + 4)
      if not id then id = sub(ids, at4 + 1, at4 + 4) end  -- one document's ops share its id
      if op ~= 114 then
        if call('HSETNX', key, field, id) == 0 then  -- the bucket exists: read it, join it
          local v = call('HGET', key, field)
          local at = find(v, id)
          n_acc = n_acc + 1
          if at then  -- already in it: 'a' reads the others, 'j' only the ones that joined before it
            acc[n_acc] = op == 97 and (sub(v, 1, at - 1) .. sub(v, at + 4)) or sub(v, 1, at - 1)
          else
            acc[n_acc] = v
            call('HSET', key, field, v .. id)
          end
        end
      else
        local v = call('HGET', key, field)
        if v then
          local at = find(v, id)
          if at then
            local rest = sub(v, 1, at - 1) .. sub(v, at + 4)
            if rest == '' then call('HDEL', key, field) else call('HSET', key, field, rest) end
          end
        end
      end
    end  -- skip: this document's record changed: leave its buckets alone
  elseif op == 100 then
    if skip then out[#out + 1] = '!' else out[#out + 1] = table.concat(acc) end
    if n_acc > 0 then acc, n_acc = {}, 0 end
    skip = false
    id = nil
  else
    local key = KEYS[unpack4('<I4', ckidx, 4 * c + 1)]
    local expected, record = ARGV[8 + 2 * c], ARGV[9 + 2 * c]
    c = c + 1
    if entry_of(call('GET', key)) ~= expected then
      skip = true
    elseif op == 99 then
      call('SET', key, record)
    elseif op == 120 then
      call('DEL', key)
    end
  end
end
return out
"""

# The record check of BUCKETS alone, for Redis Cluster (a record and its buckets live in other slots).
# KEYS: the record.  ARGV: op ('c', 'x' or 'k'), the entry id it was read with, the new record.
RECORD_CAS = _ENTRY_OF + """
if entry_of(redis.call('GET', KEYS[1])) ~= ARGV[2] then return 0 end
if ARGV[1] == 'c' then redis.call('SET', KEYS[1], ARGV[3]) elseif ARGV[1] == 'x' then redis.call('DEL', KEYS[1]) end
return 1
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
