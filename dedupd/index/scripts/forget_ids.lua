-- forget_ids: deleted documents. Forgets id -> n (only if it still maps to n: a delete done twice changes
-- nothing the second time), then n's union-find node and its place in its cluster's ring (see unionfind.py),
-- and leaves a tombstone ('<the delete's entry id> <n>') that expires after ttl ms; expired tombstones are
-- removed, at most 256 a call. A deleted document leaves its cluster's representatives (_uf_reps.lua): none
-- is ever verified, nor named, after its delete.
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] KIDS: the children counts (keys.uf_children)
-- KEYS[3] GONE: the deleted documents' nodes that stay (keys.uf_gone)
-- KEYS[4] FLOOR: the highest integer id whose children are not counted (keys.uf_floor)
-- KEYS[5] RING: the rings of the clusters' nodes (keys.uf_ring)
-- KEYS[6] FWD: the id map, document id -> integer id (keys.id_forward)
-- KEYS[7] TOMB: the tombstones, document id -> '<version> <n>' (keys.tombstones)
-- KEYS[8] TOMBX: the tombstones' expiry, document id -> ms (keys.tombstone_expiry)
-- KEYS[9] REPS: the clusters' representatives (keys.uf_reps)
-- KEYS[10] TOUCHED: when each document was last touched (keys.touched: a retention window)
-- ARGV[1] now: the time, ms since the epoch
-- ARGV[2] ttl: how long a tombstone lives, in ms
-- ARGV[3..] deleted: triples (id, n, the delete's entry id)
--
-- Returns how many expired tombstones were removed.
local UF, KIDS, GONE, FLOOR, RING = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FWD, TOMB, TOMBX, REPS, TOUCHED = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10]
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local CAP = 0  -- (a delete counts no match)
--#include _stream_id
--#include _uf_writes
--#include _uf_reps
for i = 3, #ARGV, 3 do
  local id, n, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if n ~= '0' and redis.call('HGET', FWD, id) == n then
    redis.call('HDEL', FWD, id)
    redis.call('ZREM', TOUCHED, n)
    reps_drop((walk(n)), n)
    forget_node(n)
  end
  local tomb = redis.call('HGET', TOMB, id)
  if (not tomb) or newer(entry, tomb) then
    redis.call('HSET', TOMB, id, entry .. ' ' .. n)
    redis.call('ZADD', TOMBX, now + ttl, id)
  end
end
local old = redis.call('ZRANGEBYSCORE', TOMBX, '-inf', now, 'LIMIT', 0, 256)
for _, id in ipairs(old) do
  redis.call('HDEL', TOMB, id)
  redis.call('ZREM', TOMBX, id)
end
flush_children()
flush_ring()
flush_reps()
return #old
