-- touch: documents named by a later document's alert (refresh_on_duplicate, retention.py): their age starts
-- again from the Redis server's time. Only documents that have a touch time are touched (one being expired
-- or already forgotten is not brought back), and none goes back in time.
--
-- KEYS[1] TOUCHED: when each document was last touched, integer id -> ms (keys.touched)
-- ARGV[1..] nums: the integer ids
--
-- Returns the server's time used (ms).
local TOUCHED = KEYS[1]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 1, #ARGV do
  redis.call('ZADD', TOUCHED, 'XX', 'GT', now, ARGV[i])
end
return now
