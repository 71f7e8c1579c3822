-- union_live: union_roots for documents that no daemon is processing (`dedupd rebuild --alert-existing`: the
-- documents indexed before a switch). A group whose document's id no longer maps to it (deleted meanwhile:
-- forget_ids has run or will find the node it leaves) is skipped: its node would come back with no id
-- mapping to it, and no delete would ever remove it.
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- KEYS[2] KIDS: the children counts (keys.uf_children)
-- KEYS[3] GONE: the deleted documents' nodes that stay (keys.uf_gone)
-- KEYS[4] FLOOR: the highest integer id whose children are not counted (keys.uf_floor)
-- KEYS[5] RING: the rings of the clusters' nodes (keys.uf_ring)
-- KEYS[6] FWD: the id map, document id -> integer id (keys.id_forward)
-- KEYS[7] REPS: the clusters' representatives (keys.uf_reps; counted and merged as union_roots does)
-- ARGV[1] CAP: the most representatives a cluster keeps (settings.representatives; 0: none kept)
-- ARGV[2..] groups: "n id k m1 id1 .. mk idk": union n (document id id) with the cluster of each match m
--
-- Returns per group: 0 when it was skipped; else 1, the root of n's cluster after the group, the root each m
-- had before it and the root n had before it.
local UF, KIDS, GONE, FLOOR, RING, FWD, REPS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local CAP = tonumber(ARGV[1])
--#include _uf_writes
--#include _uf_reps
--#include _uf_union
local out = {}
local i = 2
while i <= #ARGV do
  local n, k = ARGV[i], tonumber(ARGV[i + 2])
  if redis.call('HGET', FWD, ARGV[i + 1]) == n then
    out[#out + 1] = 1
    unite(n, k, ARGV, i + 3, out)
  else
    out[#out + 1] = 0
  end
  i = i + 3 + 2 * k
end
flush_children()
flush_ring()
flush_reps()
return out
