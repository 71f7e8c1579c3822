-- evict: members of a cluster between its anchor (its oldest in a bucket) and its newest leave the bucket
-- (bounds.eviction_rows), and documents the bucket refused (lua.BUCKETS) are put in when they are among the
-- ones it keeps of their cluster (a document without a cluster: its own, of one member).
--
-- KEYS[1..] buckets: bucket hashes
-- Per row (one per bucket, cluster and document of the batch that joined it; the rows of one bucket and
-- cluster are consecutive):
-- ARGV[1] kidx: per row, its bucket hash's index in KEYS (uint32 LE, 1-based)
-- ARGV[2] fields: per row, the field (4 bytes)
-- ARGV[3] groups: per row, the cluster's index g (uint32 LE, 1-based)
-- ARGV[4] docs: per row, the document (4 bytes)
-- ARGV[5] newest: the newest members of a cluster a bucket keeps (bounds.NEWEST_KEPT)
-- ARGV[6] anchors: the oldest members of a cluster a bucket keeps (bounds.ANCHORS_KEPT)
-- ARGV[7] full: the most members a bucket takes; bound as bytes (4 per member)
-- ARGV[8..] members: ARGV[7 + g], cluster g's known members (4 bytes each)
--
-- Of the cluster's known members in the bucket and the rows' documents, the newest (largest ids) and the
-- anchors (smallest ids) stay, the others leave, and a row's document that a full bucket refused takes the
-- place of one that left (the newest first, then the anchors). Members not known to be of the cluster are
-- left alone. After a merge a bucket may hold the anchors of two clusters: the next settle keeps the oldest.
-- Returns how many left.
local kidx, fields, groups, docs = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local newest, anchors, full = tonumber(ARGV[5]), tonumber(ARGV[6]), 4 * tonumber(ARGV[7])
local keep = newest + anchors
local unpack4, sub, call = struct.unpack, string.sub, redis.call
local sets, n = {}, 0
local function members_of(g)
  local s = sets[g]
  if not s then
    s = {}
    local ids = ARGV[7 + g]
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
  local order = known  -- what stays, in the order a refused one is put in: newest first, then the anchors
  if #known > keep then  -- by selection (keep is small: no sort)
    local num = {}
    for i = 1, #known do num[i] = unpack4('<I4', known[i]) end
    for i = 1, newest do  -- the newest to the front
      local top = i
      for k = i + 1, #known do if num[k] > num[top] then top = k end end
      known[i], known[top], num[i], num[top] = known[top], known[i], num[top], num[i]
    end
    order = {}
    for i = 1, newest do order[i] = known[i] end
    for i = 1, anchors do  -- the oldest of the rest to the back, oldest last
      local at, low = #known - i + 1, newest + 1
      for k = newest + 2, at do if num[k] < num[low] then low = k end end
      known[at], known[low], num[at], num[low] = known[low], known[at], num[low], num[at]
      order[newest + i] = known[at]
    end
  end
  local kept, out, present, changed = {}, {}, {}, false
  for _, m in ipairs(order) do kept[m] = true end
  for p = 1, #v, 4 do
    local m = sub(v, p, p + 3)
    if seen[m] and not kept[m] then n = n + 1; changed = true else out[#out + 1] = m; present[m] = true end
  end
  for _, m in ipairs(order) do
    if not present[m] and 4 * #out < full then out[#out + 1] = m; changed = true end
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
