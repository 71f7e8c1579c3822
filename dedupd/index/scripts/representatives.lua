-- representatives: the representatives of the clusters of some ids, and members of their rings (read only; see
-- _uf_reps.lua and unionfind.py's rings).
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] REPS: the clusters' representatives (keys.uf_reps)
-- KEYS[3] RING: the clusters' rings (keys.uf_ring)
-- ARGV[1] ring: the most nodes of each cluster's ring to list after its root, walked from the root along the
--   ring's next links (the most recently joined first: a union puts the joining ring right after the root);
--   0: none, only whether the cluster has a ring (two members or more)
-- ARGV[2..] nums: integer ids (cluster roots as the caller knows them: a root merged since is followed up)
--
-- Returns per id: the root of its cluster now, that root's representatives, packed '<I4I4' (integer id,
-- count) pairs, most matched first ('' when it has none), 0 when the root has no ring, 1 when the walk met
-- every node of its ring, 2 when the ring has more, and the nodes the walk met, packed '<I4' (a deleted
-- document's node that stays in its ring is listed: it has no record).
-- A call walks at most ring x #nums nodes (the caller splits its ids: gateway.RING_STEPS_PER_CALL).
local UF, REPS, RING = KEYS[1], KEYS[2], KEYS[3]
local ring = tonumber(ARGV[1])
--#include _uf_parents
local out = {}
for i = 2, #ARGV do
  local root = walk(ARGV[i])
  out[#out + 1] = tonumber(root)
  out[#out + 1] = redis.call('HGET', REPS, root) or ''
  local met, at = {}, root
  local v = redis.call('HGET', RING, root)
  local state = v and 2 or 0
  for _ = 0, ring do
    if not v then break end
    at = string.match(v, '^(%d+)')
    if at == root then state = 1; break end
    if #met == ring then break end
    met[#met + 1] = struct.pack('<I4', tonumber(at))
    v = redis.call('HGET', RING, at)
  end
  out[#out + 1] = state
  out[#out + 1] = table.concat(met)
end
return out
