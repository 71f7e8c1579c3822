-- _uf_parents (fragment): this call's view of the union-find parent hash: each id read once, written through.
-- up(x): x's parent (x for a root); walk(x): x's root and the nodes on the way (x first, the root's child last).
-- Uses the includer's local UF (the parent hash, keys.uf_parent). Reads no KEYS or ARGV.
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
