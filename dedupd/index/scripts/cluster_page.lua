-- cluster_page: one page of the members of a document's cluster (read only): its cluster's ring (see
-- unionfind.py) walked from the node after the page before (the document itself first), until the walk is
-- back at the document, or `limit` members, or `steps` nodes (deleted documents' nodes are walked, not listed).
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] RING: the rings of the clusters' nodes (keys.uf_ring)
-- KEYS[3] GONE: the deleted documents' nodes that stay (keys.uf_gone)
-- KEYS[4] RING_FLOOR: the highest integer id given out before the rings were kept (keys.uf_ring_floor)
-- KEYS[5] SEQ: the integer id counter (keys.id_seq)
-- KEYS[6] FWD: the id map, document id -> integer id (keys.id_forward)
-- ARGV[1] id: the document's id
-- ARGV[2] at: the node where the page before stopped ('' for the first page)
-- ARGV[3] limit: the most members to list
-- ARGV[4] steps: the most nodes to walk
--
-- Returns {state, root, whole, next, members...}: state 1 for a page, 0 when the id is not in the index, 2 when
-- `at` is no longer in the document's cluster (it was deleted meanwhile); the root of the cluster (its name);
-- whole 1 when the ring holds every member (0: the cluster's root is older than the rings, and members that
-- joined before them are missing); the node to go on from (0: none, the walk is back at the document); the
-- members' integer ids.
local UF, RING, GONE, RING_FLOOR, SEQ, FWD = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local id, at, limit, steps = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
--#include _uf_parents
local start = redis.call('HGET', FWD, id)
if not start then return {0, 0, 0, 0} end
local root = walk(start)
-- the rings' floor is set when the first daemon that keeps them opens the index; before, none is kept
local floor = redis.call('GET', RING_FLOOR) or redis.call('GET', SEQ) or '0'
local out = {1, tonumber(root), tonumber(root) > tonumber(floor) and 1 or 0, 0}
local function next_of(x)
  local v = redis.call('HGET', RING, x)
  return v and string.match(v, '^(%d+)') or x
end
if at == '' then
  at = start
elseif at == start or redis.call('HEXISTS', RING, start) == 0 or redis.call('HEXISTS', RING, at) == 0
    or walk(at) ~= root then
  out[1] = 2
  return out
end
for _ = 1, steps do
  if redis.call('HEXISTS', GONE, at) == 0 then out[#out + 1] = tonumber(at) end
  at = next_of(at)
  if at == start then return out end
  if #out - 4 >= limit then break end
end
out[4] = tonumber(at)
return out
