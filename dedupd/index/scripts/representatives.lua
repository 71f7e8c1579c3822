-- representatives: the representatives of the clusters of some ids (read only; see _uf_reps.lua).
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] REPS: the clusters' representatives (keys.uf_reps)
-- ARGV[1..] nums: integer ids (cluster roots as the caller knows them: a root merged since is followed up)
--
-- Returns per id: the root of its cluster now, and that root's representatives, packed '<I4I4' (integer id,
-- count) pairs, most matched first ('' when it has none).
local UF, REPS = KEYS[1], KEYS[2]
--#include _uf_parents
local out = {}
for i = 1, #ARGV do
  local root = walk(ARGV[i])
  out[#out + 1] = tonumber(root)
  out[#out + 1] = redis.call('HGET', REPS, root) or ''
end
return out
