-- _uf_union (fragment): unite(n, k, args, at, out), the union of document n with the cluster of each of its k
-- matches, read from args: args[at + 2j - 2] the match's integer id, args[at + 2j - 1] its document id
-- (j = 1..k); once per distinct root (the root is the cluster's oldest document: union by smaller integer id;
-- paths compressed). A match deleted meanwhile (another consumer's delete, between our read of its record and
-- this call) whose node is gone or never was (its id no longer maps to it, and no node stays for it) joins
-- nothing: it would come back as a node that no delete removes. Appends to out the root of n's cluster after,
-- the root each match had before, and the root n had before. Each match is counted in the representatives of
-- the cluster n is left in (it is n's best in its earlier cluster; one deleted meanwhile is not counted), and
-- a union merges the representatives of the two clusters into the older root's (_uf_reps). Uses the
-- includer's locals FWD (keys.id_forward) and GONE (keys.uf_gone), and _uf_writes' and _uf_reps' helpers
-- (included before it). Reads no KEYS or ARGV.
local function vanished(m, id)  -- (a node with a parent is there: no lookup)
  return up(m) == m and counted(m) and redis.call('HGET', FWD, id) ~= m and not has_children(m)
end
local function unite(n, k, args, at, out)
  local roots, done, lost, was = {}, {}, {}, find(n)
  for j = 1, k do
    local m = args[at + 2 * j - 2]
    if vanished(m, args[at + 2 * j - 1]) then
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
    local m = args[at + 2 * j - 2]
    if not lost[j] and redis.call('HEXISTS', GONE, m) == 0 then reps_count(root, m) end  -- (deleted: not)
  end
  out[#out + 1] = tonumber(root)
  for j = 1, k do out[#out + 1] = tonumber(roots[j]) end
  out[#out + 1] = tonumber(was)
end
