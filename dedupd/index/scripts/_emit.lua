-- _emit (fragment): the body of emit_many and reply. Uses the includer's locals STREAM, SEEN (KEYS[1], KEYS[2]),
-- now, maxlen, ttl (ARGV[1..3]) and reads the entries from ARGV[4] on: per entry, its marker, its field
-- count n, and n field/value pairs. Appends each entry once per marker (a redelivered input entry emits
-- nothing new), in order, the stream capped at about maxlen; markers older than ttl ms expire. Leaves n, the
-- number of entries appended.
local i, n = 4, 0
while i <= #ARGV do
  local count = tonumber(ARGV[i + 1])
  if not redis.call('ZSCORE', SEEN, ARGV[i]) then  -- the marker after the entry: a failing XADD leaves none
    redis.call('XADD', STREAM, 'MAXLEN', '~', maxlen, '*', unpack(ARGV, i + 2, i + 1 + 2 * count))
    redis.call('ZADD', SEEN, now, ARGV[i])
    n = n + 1
  end
  i = i + 2 + 2 * count
end
redis.call('ZREMRANGEBYSCORE', SEEN, '-inf', tonumber(now) - tonumber(ttl))
