-- _uf_reps (fragment): each cluster's representatives (keys.uf_reps, field = the cluster's root): at most CAP
-- members, scored by how often a later document's best match in the cluster was them, as packed '<I4I4'
-- (integer id, count) pairs, highest count first (the older first among equals); this call's view of them,
-- written at its end. reps_count(r, m): m was a best match in r's cluster (a newcomer to a full list takes
-- the last one's place with its count + 1: Space-Saving, Metwally et al. 2005); reps_merge(a, b): b's
-- cluster merged into a's (b's list goes after a's, then each rises past lower counts); reps_drop(r, m): m
-- was deleted; flush_reps() writes what changed (an empty list's field goes). Uses the includer's locals REPS
-- (keys.uf_reps) and CAP (the most kept: settings.representatives). Reads no KEYS or ARGV.
local reps, reps_changed = {}, {}
local function reps_of(r)  -- r's list of {id, count}, read once
  local l = reps[r]
  if l == nil then
    l = {}
    local v = redis.call('HGET', REPS, r)
    if v then
      for at = 1, #v - 7, 8 do
        local id, c = struct.unpack('<I4I4', string.sub(v, at, at + 7))
        l[#l + 1] = {id, c}
      end
    end
    reps[r] = l
  end
  return l
end
local function rise(l, i)  -- l[i] moves up past the entries with a lower count (equals keep their order)
  while i > 1 and l[i - 1][2] < l[i][2] do
    l[i - 1], l[i] = l[i], l[i - 1]
    i = i - 1
  end
end
local function reps_count(r, m)
  if CAP < 1 then return end
  local l, id = reps_of(r), tonumber(m)
  reps_changed[r] = true
  for i = 1, #l do
    if l[i][1] == id then
      l[i][2] = l[i][2] + 1
      rise(l, i)
      return
    end
  end
  while #l > CAP do l[#l] = nil end  -- (the setting was lowered)
  if #l < CAP then
    l[#l + 1] = {id, 1}
  else
    l[#l] = {id, l[#l][2] + 1}
  end
  rise(l, #l)
end
local function reps_merge(a, b)
  local lb = reps_of(b)
  if #lb == 0 then return end
  local la = reps_of(a)
  for _, e in ipairs(lb) do
    la[#la + 1] = e
    rise(la, #la)
  end
  while #la > CAP do la[#la] = nil end
  reps[b] = {}
  reps_changed[a], reps_changed[b] = true, true
end
local function reps_drop(r, m)
  local l, id = reps_of(r), tonumber(m)
  for i = 1, #l do
    if l[i][1] == id then
      table.remove(l, i)
      reps_changed[r] = true
      return
    end
  end
end
local function flush_reps()
  for r in pairs(reps_changed) do
    local l = reps[r]
    if #l == 0 then
      redis.call('HDEL', REPS, r)
    else
      local parts = {}
      for i = 1, #l do parts[i] = struct.pack('<I4I4', l[i][1], l[i][2]) end
      redis.call('HSET', REPS, r, table.concat(parts))
    end
  end
  reps_changed = {}
end
