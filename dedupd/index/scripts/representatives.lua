-- representatives: the representatives of the clusters of some ids, and the first members of their rings (read
-- only; see _uf_reps.lua and unionfind.py's rings).
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] REPS: the clusters' representatives (keys.uf_reps)
-- KEYS[3] RING: the clusters' rings (keys.uf_ring)
-- ARGV[1] ring: the most members of each cluster's ring to list, walked from its root (0: none)
-- ARGV[2..] nums: integer ids (cluster roots as the caller knows them: a root merged since is followed up)
--
-- Returns per id: the root of its cluster now, that root's representatives, packed '<I4I4' (integer id,
-- count) pairs, most matched first ('' when it has none), and the members its ring walk met, packed '<I4'.
local UF, REPS, RING = KEYS[1], KEYS[2], KEYS[3]
local most = tonumber(ARGV[1])
--#include _uf_parents
local out = {}
for i = 2, #ARGV do
  local root = walk(ARGV[i])
  out[#out + 1] = tonumber(root)
  out[#out + 1] = redis.call('HGET', REPS, root) or ''
  local met, at = {}, root
  for _ = 1, most do
    local v = redis.call('HGET', RING, at)
    if not v then break end
    at = string.match(v, '^(%d+)')
    if at == root then break end
    met[#met + 1] = struct.pack('<I4', tonumber(at))
  end
  out[#out + 1] = table.concat(met)
end
return out
