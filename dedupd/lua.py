"""Server-side Lua scripts. Each touches keys of one hash slot only (Redis Cluster safe)."""

from __future__ import annotations

# KEYS: fwd, rev, seq.  ARGV: pairs (mode, id), mode "a" = get or assign, "g" = get only.
# Returns per id: n (existing), -n (newly assigned), 0 (unknown, get only).
RESOLVE_IDS = """
local out = {}
for i = 1, #ARGV, 2 do
  local mode, id = ARGV[i], ARGV[i + 1]
  local n = redis.call('HGET', KEYS[1], id)
  if n then
    out[#out + 1] = tonumber(n)
  elseif mode == 'a' then
    n = redis.call('INCR', KEYS[3])
    redis.call('HSET', KEYS[1], id, n)
    redis.call('HSET', KEYS[2], n, id)
    out[#out + 1] = -n
  else
    out[#out + 1] = 0
  end
end
return out
"""

# KEYS: fwd.  ARGV: id, n.  Forgets id -> n only if it still maps to n (rev is kept for cluster names).
FORGET_ID = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""

# KEYS: stream, seen (a sorted set in the stream's slot).
# ARGV: marker, now_ms, maxlen, ttl_ms, field, value, ...
# Appends the entry once per marker (a redelivered input entry emits nothing new); old markers expire.
EMIT_ONCE = """
if redis.call('ZADD', KEYS[2], 'NX', ARGV[2], ARGV[1]) == 0 then
  return 0
end
local args = {'XADD', KEYS[1], 'MAXLEN', '~', ARGV[3], '*'}
for i = 5, #ARGV do args[#args + 1] = ARGV[i] end
redis.call(unpack(args))
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', tonumber(ARGV[2]) - tonumber(ARGV[4]))
return 1
"""

# KEYS: parent, rev.  ARGV: groups "n k m1 .. mk": union n with each m; returns per group the root's
# document id (the root is the cluster's oldest document: union by smaller integer id).
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
  local root = find(n)
  out[#out + 1] = redis.call('HGET', KEYS[2], root) or ('#' .. root)
  i = i + 2 + k
end
return out
"""
