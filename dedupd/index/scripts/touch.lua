-- touch: documents start their age again from the Redis server's time (retention.py), none going back in
-- time, in one of two modes:
--   'w' written: the documents an upsert or append is about to write (queued before the write: a document is
--       never expired between its write and its touch), new ones included, except one being expired: a write
--       that lands before the expiry's delete keeps it (expire_finish.lua puts it back), one that comes after
--       finds its record gone and its entry waits for the expiry (planner.decide)
--   'n' named: documents named by a later document's alert (refresh_on_duplicate): only those with a touch
--       time (one being expired or already forgotten is not brought back)
--
-- KEYS[1] TOUCHED: when each document was last touched, integer id -> ms (keys.touched)
-- KEYS[2] EXPIRING: the documents being expired, integer id -> when the claim lapses (keys.expiring)
-- ARGV[1] mode: 'w' or 'n'
-- ARGV[2..] nums: the integer ids
--
-- Returns the server's time used (ms).
local TOUCHED, EXPIRING = KEYS[1], KEYS[2]
local mode = ARGV[1]
local written = mode == 'w'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do
  if not written then
    redis.call('ZADD', TOUCHED, 'XX', 'GT', now, ARGV[i])
  elseif not redis.call('ZSCORE', EXPIRING, ARGV[i]) then
    redis.call('ZADD', TOUCHED, 'GT', now, ARGV[i])
  end
end
return now
