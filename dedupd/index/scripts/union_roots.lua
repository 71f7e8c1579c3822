-- union_roots: unions of documents with the clusters of their matches, once per distinct root (see
-- _uf_union: a match deleted meanwhile joins nothing).
--
-- Each group also counts its matches in the representatives of the cluster it leaves n in (_uf_reps.lua: each
-- match is n's best in its earlier cluster; one deleted meanwhile is not counted), and a union merges the
-- representatives of the two clusters into the older root's.
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] KIDS: the children counts (keys.uf_children)
-- KEYS[3] GONE: the deleted documents' nodes that stay (keys.uf_gone)
-- KEYS[4] FLOOR: the highest integer id whose children are not counted (keys.uf_floor)
-- KEYS[5] RING: the rings of the clusters' nodes (keys.uf_ring): two clusters merged, their rings are joined
-- KEYS[6] FWD: the id map, document id -> integer id (keys.id_forward)
-- KEYS[7] REPS: the clusters' representatives (keys.uf_reps)
-- ARGV[1] CAP: the most representatives a cluster keeps (settings.representatives; 0: none kept)
-- ARGV[2..] groups: "n k m1 id1 .. mk idk": union n with the cluster of each match m (its document id id)
--
-- Returns per group: the root of n's cluster after the group, then the root each m had before it, then the
-- root n had before it.
local UF, KIDS, GONE, FLOOR, RING, FWD, REPS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local CAP = tonumber(ARGV[1])
--#include _uf_writes
--#include _uf_reps
--#include _uf_union
local out = {}
local i = 2
while i <= #ARGV do
  local k = tonumber(ARGV[i + 1])
  unite(ARGV[i], k, ARGV, i + 2, out)
  i = i + 2 + 2 * k
end
flush_children()
flush_ring()
flush_reps()
return out
