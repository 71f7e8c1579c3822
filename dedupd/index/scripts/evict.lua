-- evict: older members of a cluster leave a bucket to newer ones (bounds.eviction_rows), and documents the
-- bucket refused (lua.BUCKETS) are put in when they are among the newest of their cluster (a document without
-- a cluster: its own, of one member).
--
-- KEYS[1..] buckets: bucket hashes
-- Per row (one per bucket, cluster and document of the batch that joined it; the rows of one bucket and
-- cluster are consecutive):
-- ARGV[1] kidx: per row, its bucket hash's index in KEYS (uint32 LE, 1-based)
-- ARGV[2] fields: per row, the field (4 bytes)
-- ARGV[3] groups: per row, the cluster's index g (uint32 LE, 1-based)
-- ARGV[4] docs: per row, the document (4 bytes)
-- ARGV[5] keep: the members of a cluster a bucket keeps
-- ARGV[6] full: the most members a bucket takes; bound as bytes (4 per member)
-- ARGV[7..] members: ARGV[6 + g], cluster g's known members (4 bytes each)
--
-- Of the cluster's known members in the bucket and the rows' documents, the keep newest (largest id) stay,
-- the others leave, and a row's document that a full bucket refused takes the place of one that left. Members
-- not known to be of the cluster are left alone. Returns how many left.
local kidx, fields, groups, docs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local keep, full = tonumber(ARGV[5]), 4 * tonumber(ARGV[6])
local unpack4, sub, call = struct.unpack, string.sub, redis.call
local sets, n = {}, 0
local function members_of(g)
  local s = sets[g]
  if not s then
    s = {}
    local ids = ARGV[6 + g]
    for p = 1, #ids, 4 do s[sub(ids, p, p + 3)] = true end
    sets[g] = s
  end
  return s
end
local function settle(key, field, s, held)
  local v = call('HGET', key, field)
  if not v then return end
  local known, seen = {}, {}
  for p = 1, #v, 4 do
    local m = sub(v, p, p + 3)
    if s[m] and not seen[m] then known[#known + 1] = m; seen[m] = true end
  end
  for _, m in ipairs(held) do
    if not seen[m] then known[#known + 1] = m; seen[m] = true end
  end
  if #known > keep then  -- the keep newest (largest ids) first, by selection (keep is small: no sort)
    local num = {}
    for i = 1, #known do num[i] = unpack4('<I4', known[i]) end
    for i = 1, keep do
      local top = i
      for k = i + 1, #known do if num[k] > num[top] then top = k end end
      known[i], known[top], num[i], num[top] = known[top], known[i], num[top], num[i]
    end
  end
  local kept, out, present, changed = {}, {}, {}, false
  for i = 1, math.min(keep, #known) do kept[known[i]] = true end
  for p = 1, #v, 4 do
    local m = sub(v, p, p + 3)
    if seen[m] and not kept[m] then n = n + 1; changed = true else out[#out + 1] = m; present[m] = true end
  end
  for i = 1, math.min(keep, #known) do
    if not present[known[i]] and 4 * #out < full then out[#out + 1] = known[i]; changed = true end
  end
  if changed then call('HSET', key, field, table.concat(out)) end
end
local key, field, group, held = nil, nil, nil, {}
for at = 1, #fields, 4 do
  local k, f, g = KEYS[(unpack4('<I4', kidx, at))], sub(fields, at, at + 3), (unpack4('<I4', groups, at))
  if k ~= key or f ~= field or g ~= group then
    if key then settle(key, field, members_of(group), held) end
    key, field, group, held = k, f, g, {}
  end
  held[#held + 1] = sub(docs, at, at + 3)
end
if key then settle(key, field, members_of(group), held) end
return n
