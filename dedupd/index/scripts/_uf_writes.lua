-- _uf_writes (fragment): the helpers of the scripts that change the union-find (see unionfind.py): counted,
-- has_children, flush_children, lost_child, set_parent, find, forget_node, and the rings' (_uf_ring). Uses the
-- includer's locals UF, KIDS, GONE, FLOOR, RING (the parent, children, gone hashes, the floor and the rings:
-- keys.uf_*). Reads no KEYS or ARGV.
local floor = tonumber(redis.call('GET', FLOOR) or '0')
--#include _uf_parents
--#include _uf_ring
local function counted(x) return tonumber(x) > floor end
-- children counted by this call, added to KIDS when a node loses one, else at the call's end (flush_children):
-- a flood's copies all join one root, one HINCRBY a call instead of one a copy
local added = {}
local function children_added(p)
  local d = added[p]
  added[p] = nil
  return d or 0
end
local function has_children(n) return added[n] ~= nil or redis.call('HEXISTS', KIDS, n) == 1 end
local function flush_children()
  for p, d in pairs(added) do redis.call('HINCRBY', KIDS, p, d) end
  added = {}
end
-- p lost a child: a deleted document's node left without children goes, and its parent loses a child, ...
local function lost_child(p)
  while counted(p) do
    if redis.call('HINCRBY', KIDS, p, children_added(p) - 1) > 0 then return end
    redis.call('HDEL', KIDS, p)
    if redis.call('HDEL', GONE, p) == 0 then return end  -- a live document's node: it stays
    local q = up(p)
    ring_leave(p)
    if q == p then return end  -- a root: nothing points to it any more
    redis.call('HDEL', UF, p)
    parent[p] = p
    p = q
  end
end
local function set_parent(x, p)  -- x points at p from now on (p counted first: it cannot go meanwhile)
  local old = up(x)
  if old == p then return end
  parent[x] = p
  redis.call('HSET', UF, x, p)
  if counted(p) then added[p] = (added[p] or 0) + 1 end
  if old ~= x then lost_child(old) end
end
-- x's root, the path to it compressed from the top: a node moves before it can lose its last child
local function find(x)
  local root, path = walk(x)
  for i = #path - 1, 1, -1 do set_parent(path[i], root) end
  return root
end
-- a deleted document's node: it goes when no node points to it, else it stays, marked, until its last child goes;
-- given a name (an expired document's id), a root that stays keeps naming its cluster ('=' .. name; else 1)
local function forget_node(n, name)
  if not counted(n) then return end
  if has_children(n) then
    redis.call('HSET', GONE, n, (name and up(n) == n) and ('=' .. name) or 1)
    return
  end
  local p = up(n)
  ring_leave(n)
  if p == n then return end
  redis.call('HDEL', UF, n)
  parent[n] = n
  lost_child(p)
end
