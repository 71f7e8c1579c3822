-- lookup_inflight: reconciles the registry with the group's pending entries if they differ, then returns each
-- document's in-flight entries: atomically, so that every entry delivered before this moment is in the answer.
--
-- KEYS[1] STREAM: the input stream (keys.docs)
-- KEYS[2] INFLIGHT: its in-flight hash (keys.inflight)
-- KEYS[3] INFLIGHT_N: its in-flight count (keys.inflight_count)
-- ARGV[1] group: the consumer group
-- ARGV[2] maxid: the longest accepted document id
-- ARGV[3] limit: the most pending entries to look at
-- ARGV[4..] docs: document ids
--
-- Returns per document its in-flight entry ids (space-separated), or false.
local STREAM, INFLIGHT, INFLIGHT_N = KEYS[1], KEYS[2], KEYS[3]
local group, maxid, limit = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
--#include _registry
reconcile(group, maxid, limit)
local out = {}
for i = 4, #ARGV, 1000 do  -- unpack takes a few thousand values at most
  local part = redis.call('HMGET', INFLIGHT, unpack(ARGV, i, math.min(i + 999, #ARGV)))
  for _, v in ipairs(part) do out[#out + 1] = v end
end
return out
