-- _registry (fragment): the in-flight registry's helpers, for read, lookup_inflight, prune_inflight and ack.
-- Uses the includer's locals STREAM (the input stream), INFLIGHT (a hash, document id -> its in-flight entry ids,
-- space-separated; '' is the field of entries without an acceptable id) and INFLIGHT_N (how many entries it
-- holds): KEYS[1..3] of each of them. Reads no ARGV.
-- a field with a long value keeps the hash in Redis's hashtable encoding: a small hash is a listpack, which
-- every lookup scans (HMGET of a batch's documents took ~1.4 us a field instead of ~0.1); the sentinel is a field
-- no document id can be (keys.INFLIGHT_SENTINEL), its value 80 bytes
local function keep_hashtable()
  redis.call('HSETNX', INFLIGHT, '{{INFLIGHT_SENTINEL}}', 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx')
end
local function add(eid, doc)  -- 1 when newly recorded
  if redis.call('HSETNX', INFLIGHT, doc, eid) == 1 then return 1 end  -- the usual case: its only entry
  local have = redis.call('HGET', INFLIGHT, doc)
  for x in string.gmatch(have, '%S+') do if x == eid then return 0 end end
  redis.call('HSET', INFLIGHT, doc, have .. ' ' .. eid)
  return 1
end
local function remove(eid, doc)  -- 1 when it was recorded
  local have = redis.call('HGET', INFLIGHT, doc)
  if not have then return 0 end
  local rest, found = {}, 0
  for x in string.gmatch(have, '%S+') do if x ~= eid then rest[#rest + 1] = x else found = 1 end end
  if found == 0 then return 0 end
  if #rest == 0 then redis.call('HDEL', INFLIGHT, doc) else redis.call('HSET', INFLIGHT, doc, table.concat(rest, ' ')) end
  return 1
end
-- the document id of an entry (its flat field list), '' when it has no acceptable one: keys.entry_doc in Lua
local function doc_of(fields, maxid)
  for i = 1, #fields, 2 do
    if fields[i] == '{{DOC_ID_FIELD}}' then
      local doc = fields[i + 1]
      if #doc > 0 and #doc <= maxid then return doc end
      return ''
    end
  end
  return ''
end
-- Make the registry hold the group's pending entries (at most `limit` of them): cheap when it already does
-- (one XPENDING summary and one GET); else it is rebuilt from the pending entries (entries another consumer
-- has read and not yet recorded, read by a plain XREADGROUP, or acknowledged behind its back).
local function reconcile(group, maxid, limit)
  local pending = tonumber(redis.call('XPENDING', STREAM, group)[1])
  if pending == tonumber(redis.call('GET', INFLIGHT_N) or '0') then return 0 end
  redis.call('DEL', INFLIGHT)
  keep_hashtable()
  local n = 0
  for _, p in ipairs(redis.call('XPENDING', STREAM, group, '-', '+', limit)) do
    local got = redis.call('XRANGE', STREAM, p[1], p[1])
    n = n + add(p[1], got[1] and doc_of(got[1][2], maxid) or '')
  end
  redis.call('SET', INFLIGHT_N, n)
  return 1
end
