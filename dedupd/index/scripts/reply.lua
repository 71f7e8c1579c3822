-- reply: a query's reply stream: emit_many, then both keys expire ttl ms after the last verdict (an idle reply
-- stream goes).
--
-- KEYS[1] STREAM: the reply stream (keys.reply)
-- KEYS[2] SEEN: a sorted set in the stream's slot, marker -> when it was appended (keys.seen)
-- ARGV[1] now: the time, ms since the epoch
-- ARGV[2] maxlen: the stream's approximate cap
-- ARGV[3] ttl: how long a marker is kept, and the keys once idle, in ms
-- ARGV[4..] entries: per entry, its marker, its field count n, then n field/value pairs
--
-- Returns how many entries were appended.
local STREAM, SEEN = KEYS[1], KEYS[2]
local now, maxlen, ttl = ARGV[1], ARGV[2], ARGV[3]
--#include _emit
redis.call('PEXPIRE', STREAM, ttl)
redis.call('PEXPIRE', SEEN, ttl)
return n
