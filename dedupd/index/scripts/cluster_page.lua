-- cluster_page: one page of the members of a document's cluster (read only): its cluster's ring (see
-- unionfind.py) walked from the node after the page before (the document itself first), until the walk is
-- back at the document, or `limit` members, or `steps` nodes (deleted documents' nodes are walked, not listed).
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] KIDS: the children counts (keys.uf_children)
-- KEYS[3] GONE: the deleted documents' nodes that stay (keys.uf_gone)
-- KEYS[4] FLOOR: the highest integer id whose children are not counted (keys.uf_floor)
-- KEYS[5] RING: the rings of the clusters' nodes (keys.uf_ring)
-- KEYS[6] RING_FLOOR: the highest integer id given out before the rings were kept (keys.uf_ring_floor)
-- KEYS[7] SEQ: the integer id counter (keys.id_seq)
-- KEYS[8] FWD: the id map, document id -> integer id (keys.id_forward)
-- ARGV[1] id: the document's id
-- ARGV[2] at: the node where the page before stopped ('' for the first page)
-- ARGV[3] limit: the most members to list
-- ARGV[4] steps: the most nodes to walk
--
-- Returns {state, root, whole, next, members...}: state 1 for a page, 0 when the id is not in the index, 2 when
-- `at` is no longer in the document's cluster (it was deleted meanwhile); the root of the cluster (its name);
-- whole 1 when the ring provably holds every member (0: the cluster's root is older than the rings, and members
-- that joined it before them may be missing); the node to go on from (0: none, the walk is back at the
-- document); the members' integer ids.
--
-- Whole: every node given out after the rings is in its cluster's ring, and so is every older node that was a
-- root when a union took it in; a member missing from the ring is an older node that had a parent before the
-- rings. Following parents up from it, the first node in the ring is older still (union by smaller id), and one
-- of its children is missing. So the ring holds every member when the root is newer than the rings, or when
-- this call walked the root's whole ring (a first page that is the last) and each node in it older than the
-- rings has its children counted (newer than FLOOR) and as many as point at it from the ring. A cluster of one
-- is whole by the same rule: its root alone, counted, with no children.
local UF, KIDS, GONE, FLOOR, RING = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local RING_FLOOR, SEQ, FWD = KEYS[6], KEYS[7], KEYS[8]
local id, at, limit, steps = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
--#include _uf_parents
local start = redis.call('HGET', FWD, id)
if not start then return {0, 0, 0, 0} end
local root = walk(start)
-- the floors are set when the first daemon that keeps counts (rings) opens the index; before, none is kept
local function floor_of(key) return tonumber(redis.call('GET', key) or redis.call('GET', SEQ) or '0') end
local ring_floor = floor_of(RING_FLOOR)
local out = {1, tonumber(root), tonumber(root) > ring_floor and 1 or 0, 0}
local function next_of(x)
  local v = redis.call('HGET', RING, x)
  return v and string.match(v, '^(%d+)') or x
end
-- the whole ring walked (nodes, in order): whether it holds every member (see Whole above)
local function holds_all(nodes)
  local kids, has_root = {}, false
  for _, x in ipairs(nodes) do
    local p = up(x)
    if p ~= x then kids[p] = (kids[p] or 0) + 1 end
    if x == root then has_root = true end
  end
  if not has_root then return false end  -- the document's own node is out of its root's ring
  local count_floor = floor_of(FLOOR)
  for _, x in ipairs(nodes) do
    if tonumber(x) <= ring_floor and (tonumber(x) <= count_floor
        or tonumber(redis.call('HGET', KIDS, x) or '0') ~= (kids[x] or 0)) then
      return false
    end
  end
  return true
end
local first = at == ''
if first then
  at = start
elseif at == start or redis.call('HEXISTS', RING, start) == 0 or redis.call('HEXISTS', RING, at) == 0
    or walk(at) ~= root then
  out[1] = 2
  return out
end
local walked = {}
for _ = 1, steps do
  walked[#walked + 1] = at
  if redis.call('HEXISTS', GONE, at) == 0 then out[#out + 1] = tonumber(at) end
  at = next_of(at)
  if at == start then
    if first and out[3] == 0 and holds_all(walked) then out[3] = 1 end
    return out
  end
  if #out - 4 >= limit then break end
end
out[4] = tonumber(at)
return out
