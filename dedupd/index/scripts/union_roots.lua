-- union_roots: unions of documents with the clusters of their matches, once per distinct root (the root is the
-- cluster's oldest document: union by smaller integer id; paths compressed). A match deleted meanwhile (another
-- consumer's delete, between our read of its record and this call) whose node is gone or never was (its id no
-- longer maps to it, and no node stays for it) joins nothing: it would come back as a node that no delete
-- removes.
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
local function vanished(m, id)  -- (a node with a parent is there: no lookup)
  return up(m) == m and counted(m) and redis.call('HGET', FWD, id) ~= m and not has_children(m)
end
local out = {}
local i = 2
while i <= #ARGV do
  local n, k = ARGV[i], tonumber(ARGV[i + 1])
  local roots, done, lost, was = {}, {}, {}, find(n)
  for j = 1, k do
    local m = ARGV[i + 2 * j]
    if vanished(m, ARGV[i + 1 + 2 * j]) then
      roots[j], done[m], lost[j] = m, true, true
    else
      roots[j] = find(m)
    end
  end
  for j = 1, k do
    if not done[roots[j]] then
      done[roots[j]] = true
      local a, b = find(n), find(roots[j])
      if a ~= b then
        if tonumber(a) > tonumber(b) then a, b = b, a end
        set_parent(b, a)
        ring_join(a, b)
        reps_merge(a, b)
      end
    end
  end
  local root = find(n)
  for j = 1, k do
    local m = ARGV[i + 2 * j]
    if not lost[j] and redis.call('HEXISTS', GONE, m) == 0 then reps_count(root, m) end  -- (deleted: not)
  end
  out[#out + 1] = tonumber(root)
  for j = 1, k do out[#out + 1] = tonumber(roots[j]) end
  out[#out + 1] = tonumber(was)
  i = i + 2 + 2 * k
end
flush_children()
flush_ring()
flush_reps()
return out
