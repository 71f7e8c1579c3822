"""The union-find of duplicate clusters in Redis: its Lua scripts (find, union, and a deleted document's node).

Every document has an integer id (keys.py: ``id_forward``); a cluster is a tree of them in one hash, child ->
parent (:attr:`Keys.uf_parent`; a root has no entry). Unions are by smaller integer id, so a cluster's root is
its oldest document, a node's parent is always older than the node, and an alert names the cluster by its
root (gateway.cluster_names). Finds that write (a union) compress the paths they walk.

Deleted documents: a node's children are counted (:attr:`Keys.uf_children`, only for nodes that have some).
When a document is deleted (``FORGET_IDS``), its node goes if no node points to it, and its parent loses a
child; a parent whose document was deleted before and which is left without children goes too, and so on
up the path. A deleted document's node that still has children stays, marked (:attr:`Keys.uf_gone`), as the
link that holds its cluster together and, when it is the root, as the cluster's name; it goes with its last
child. No child is ever moved to another parent on a delete: a script's work is bounded by the length of a
path, never by the size of a cluster (a flood makes clusters of 100,000 copies whose root has them all as
children). What stays after every document of a cluster is deleted: nothing.

Example: ``2 -> 1`` and ``3 -> 1`` (1 is the root, with two children). Delete 1: it stays, marked (the root
and name of {2, 3}). Delete 2: its entry goes, 1 has one child. Delete 3: its entry goes, 1 has none and is
marked: 1 goes too. The hashes are as before the three documents came.

Integer ids given out before the counts existed (an index made by an earlier version: up to
:attr:`Keys.uf_floor`, set when the first daemon of this version opens it) are not counted: their nodes stay,
as before. Every script touches the ``{<prefix>:ids}`` slot only.
"""

from __future__ import annotations

from dedupd.index.lua import STREAM_ID

# This call's view of the union-find parent hash UF: each id read once, written through.
# walk(x): x's root and the nodes on the way (x first, the root's child last).
_PARENTS = """
local parent = {}
local function up(x)
  local p = parent[x]
  if p == nil then
    p = redis.call('HGET', UF, x) or x
    parent[x] = p
  end
  return p
end
local function walk(x)
  local root, path = x, {}
  for _ = 1, 100000 do
    local p = up(root)
    if p == root then break end
    path[#path + 1] = root
    root = p
  end
  return root, path
end
"""

# The scripts that change the union-find: KEYS[1..4] = parent, children, gone, floor (keys.py: uf_*).
_WRITES = (
    """
local UF, KIDS, GONE = KEYS[1], KEYS[2], KEYS[3]
local floor = tonumber(redis.call('GET', KEYS[4]) or '0')
"""
    + _PARENTS
    + """
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
-- a deleted document's node: it goes when no node points to it, else it stays, marked, until its last child goes
local function forget_node(n)
  if not counted(n) then return end
  if has_children(n) then
    redis.call('HSET', GONE, n, 1)
    return
  end
  local p = up(n)
  if p == n then return end
  redis.call('HDEL', UF, n)
  parent[n] = n
  lost_child(p)
end
"""
)

# KEYS: parent.  ARGV: integer ids.  Returns the root of each one's cluster (read only).
FIND_ROOTS = (
    "local UF = KEYS[1]\n"
    + _PARENTS
    + """
local out = {}
for i = 1, #ARGV do out[i] = tonumber((walk(ARGV[i]))) end
return out
"""
)

# KEYS: parent, children, gone, floor, the id map (document id -> integer id).
# ARGV: groups "n k m1 id1 .. mk idk": union n with the cluster of each match m (its document id id), once per
# distinct root (the root is the cluster's oldest document: union by smaller integer id; paths compressed).
# A match deleted meanwhile (another consumer's delete, between our read of its record and this call) whose
# node is gone or never was (its id no longer maps to it, and no node stays for it) joins nothing: it would
# come back as a node that no delete removes.
# Returns per group: the root of n's cluster after the group, then the root each m had before it, then the root
# n had before it.
UNION_ROOTS = (
    _WRITES
    + """
local function vanished(m, id)  -- (a node with a parent is there: no lookup)
  return up(m) == m and counted(m) and redis.call('HGET', KEYS[5], id) ~= m and not has_children(m)
end
local out = {}
local i = 1
while i <= #ARGV do
  local n, k = ARGV[i], tonumber(ARGV[i + 1])
  local roots, done, was = {}, {}, find(n)
  for j = 1, k do
    local m = ARGV[i + 2 * j]
    if vanished(m, ARGV[i + 1 + 2 * j]) then
      roots[j], done[m] = m, true
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
      end
    end
  end
  out[#out + 1] = tonumber(find(n))
  for j = 1, k do out[#out + 1] = tonumber(roots[j]) end
  out[#out + 1] = tonumber(was)
  i = i + 2 + 2 * k
end
flush_children()
return out
"""
)

# KEYS: parent, children, gone, floor, the id map, tombstones, tombstone expiry.
# ARGV: now_ms, ttl_ms, then triples (id, n, delete's entry id).
# Forgets id -> n (only if it still maps to n: a delete done twice changes nothing the second time), then n's
# union-find node (see the module docstring), and leaves a tombstone ('<the delete's entry id> <n>') that
# expires after ttl_ms; expired tombstones are removed, at most 256 a call.
FORGET_IDS = (
    STREAM_ID
    + _WRITES
    + """
local FWD, TOMB, TOMBX = KEYS[5], KEYS[6], KEYS[7]
local now, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 3, #ARGV, 3 do
  local id, n, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if n ~= '0' and redis.call('HGET', FWD, id) == n then
    redis.call('HDEL', FWD, id)
    forget_node(n)
  end
  local tomb = redis.call('HGET', TOMB, id)
  if (not tomb) or newer(entry, tomb) then
    redis.call('HSET', TOMB, id, entry .. ' ' .. n)
    redis.call('ZADD', TOMBX, now + ttl, id)
  end
end
local old = redis.call('ZRANGEBYSCORE', TOMBX, '-inf', now, 'LIMIT', 0, 256)
for _, id in ipairs(old) do
  redis.call('HDEL', TOMB, id)
  redis.call('ZREM', TOMBX, id)
end
flush_children()
return #old
"""
)

# KEYS: floor, the integer id counter.  Sets the floor once, to the last integer id given out (0 for a new
# index): the nodes of the ids given out before are not counted. Returns the floor.
SET_FLOOR = """
redis.call('SET', KEYS[1], redis.call('GET', KEYS[2]) or '0', 'NX')
return tonumber(redis.call('GET', KEYS[1]))
"""
