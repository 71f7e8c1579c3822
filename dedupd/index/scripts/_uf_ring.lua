-- _uf_ring (fragment): the ring of each cluster's union-find nodes (see unionfind.py), this call's view of it,
-- written at the call's end: ring_join(a, b) joins the rings of a and b (two clusters merged), ring_leave(x)
-- takes x out of its ring (its node went), flush_ring() writes what changed. A node's entry is
-- '<next> <prev>'; a node alone has none. Uses the includer's local RING (keys.uf_ring). Reads no KEYS or ARGV.
local ring, ring_changed = {}, {}
local function links(x)  -- {next, prev} of x, read once
  local l = ring[x]
  if l == nil then
    local v = redis.call('HGET', RING, x)
    if v then l = {string.match(v, '^(%d+) (%d+)$')} else l = {x, x} end
    ring[x] = l
  end
  return l
end
local function set_next(x, n) links(x)[1] = n; ring_changed[x] = true end
local function set_prev(x, p) links(x)[2] = p; ring_changed[x] = true end
local function ring_join(a, b)  -- a -> (b's next .. b) -> (a's next .. a): one ring
  local an, bn = links(a)[1], links(b)[1]
  set_next(a, bn); set_prev(bn, a); set_next(b, an); set_prev(an, b)
end
local function ring_leave(x)
  local l = links(x)
  local n, p = l[1], l[2]
  if n == x then return end
  set_next(p, n); set_prev(n, p); set_next(x, x); set_prev(x, x)
end
local function flush_ring()  -- one HSET and one HDEL per 1,000 nodes (a flood's call joins hundreds)
  local set, gone = {}, {}
  for x in pairs(ring_changed) do
    local l = ring[x]
    if l[1] == x then
      gone[#gone + 1] = x
    else
      set[#set + 1] = x
      set[#set + 1] = l[1] .. ' ' .. l[2]
    end
  end
  for i = 1, #set, 2000 do redis.call('HSET', RING, unpack(set, i, math.min(i + 1999, #set))) end
  for i = 1, #gone, 1000 do redis.call('HDEL', RING, unpack(gone, i, math.min(i + 999, #gone))) end
  ring_changed = {}
end
