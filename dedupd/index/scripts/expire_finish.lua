-- expire_finish: the end of a claim (retention.py), once the records and buckets of its documents were dealt
-- with: an expired document leaves as a delete does (forget_ids.lua: its id, its union-find node and ring
-- place, its cluster's representatives) but leaves no tombstone, and a root whose node stays (it links live
-- members) keeps its id in its gone-node entry: its cluster's name stays (unionfind.py); a document whose
-- record changed since the claim read it (an update came first) goes back to TOUCHED; one with no record is
-- let go. Only documents still claimed with this deadline are done (a claim taken over after it lapsed is the
-- other daemon's).
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] KIDS: the children counts (keys.uf_children)
-- KEYS[3] GONE: the deleted and expired documents' nodes that stay (keys.uf_gone)
-- KEYS[4] FLOOR: the highest integer id whose children are not counted (keys.uf_floor)
-- KEYS[5] RING: the rings of the clusters' nodes (keys.uf_ring)
-- KEYS[6] FWD: the id map, document id -> integer id (keys.id_forward)
-- KEYS[7] REPS: the clusters' representatives (keys.uf_reps)
-- KEYS[8] TOUCHED: when each document was last touched (keys.touched)
-- KEYS[9] EXPIRING: the documents being expired (keys.expiring)
-- KEYS[10] EXPIDS: the document ids noted for them (keys.expiring_ids)
-- KEYS[11] EXPIRED: how many documents expired so far (keys.expired_count): counted here
-- ARGV[1] deadline: the claim's deadline (expire_claim.lua)
-- ARGV[2..] done: triples (integer id, document id, outcome): 'x' expired (its record is gone), 'k' kept
--   (its record changed since read), '-' no record and no id known
--
-- Returns how many documents expired.
local UF, KIDS, GONE, FLOOR, RING = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local FWD, REPS, TOUCHED, EXPIRING, EXPIDS, EXPIRED = KEYS[6], KEYS[7], KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local deadline = tonumber(ARGV[1])
local CAP = 0  -- (an expiry counts no match)
--#include _uf_writes
--#include _uf_reps
local expired = 0
local now
for i = 2, #ARGV, 3 do
  local n, id, outcome = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if tonumber(redis.call('ZSCORE', EXPIRING, n) or '-1') == deadline then
    if outcome == 'x' then
      if redis.call('HGET', FWD, id) == n then
        redis.call('HDEL', FWD, id)
        reps_drop((walk(n)), n)
        forget_node(n, id)  -- (a root that stays keeps naming its cluster)
      end
      expired = expired + 1
    elseif outcome == 'k' then
      if not now then
        local t = redis.call('TIME')
        now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
      end
      redis.call('ZADD', TOUCHED, 'NX', now, n)
    end
    redis.call('ZREM', EXPIRING, n)
    redis.call('HDEL', EXPIDS, n)
  end
end
flush_children()
flush_ring()
flush_reps()
if expired > 0 then redis.call('INCRBY', EXPIRED, expired) end
return expired
