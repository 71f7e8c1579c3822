-- ack: acknowledges the entries and removes them from the registry, atomically.
--
-- KEYS[1] STREAM: the input stream (keys.docs)
-- KEYS[2] INFLIGHT: its in-flight hash (keys.inflight)
-- KEYS[3] INFLIGHT_N: its in-flight count (keys.inflight_count)
-- ARGV[1] group: the consumer group
-- ARGV[2..] pairs: (entry id, its document id or '')
--
-- Returns how many entries it was given.
local STREAM, INFLIGHT, INFLIGHT_N = KEYS[1], KEYS[2], KEYS[3]
local group = ARGV[1]
--#include _registry
local ids, acked = {}, 0
for i = 2, #ARGV, 2 do
  ids[#ids + 1] = ARGV[i]
  remove(ARGV[i], ARGV[i + 1])
end
for i = 1, #ids, 1000 do
  acked = acked + redis.call('XACK', STREAM, group, unpack(ids, i, math.min(i + 999, #ids)))
end
-- the count follows the pending entries (a too low count only makes the next lookup rebuild the registry)
if acked > 0 then redis.call('DECRBY', INFLIGHT_N, acked) end
return #ids
