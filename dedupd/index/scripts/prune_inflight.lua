-- prune_inflight: removes the registry's records of entries no longer pending in the group (an entry deleted
-- from the stream and acknowledged without its document).
--
-- KEYS[1] STREAM: the input stream (keys.docs)
-- KEYS[2] INFLIGHT: its in-flight hash (keys.inflight)
-- KEYS[3] INFLIGHT_N: its in-flight count (keys.inflight_count)
-- ARGV[1] group: the consumer group
-- ARGV[2..] pairs: (entry id, its document id): records that block an entry for long
--
-- Returns how many it removed.
local STREAM, INFLIGHT, INFLIGHT_N = KEYS[1], KEYS[2], KEYS[3]
local group = ARGV[1]
--#include _registry
local n = 0
for i = 2, #ARGV, 2 do
  if #redis.call('XPENDING', STREAM, group, ARGV[i], ARGV[i], 1) == 0 then n = n + remove(ARGV[i], ARGV[i + 1]) end
end
return n
