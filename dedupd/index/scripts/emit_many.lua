-- emit_many: alerts, baskets, dead letters appended to an output stream, once per input entry (one call per
-- batch and stream).
--
-- KEYS[1] STREAM: the output stream
-- KEYS[2] SEEN: a sorted set in the stream's slot, marker -> when it was appended (keys.seen)
-- ARGV[1] now: the time, ms since the epoch
-- ARGV[2] maxlen: the stream's approximate cap
-- ARGV[3] ttl: how long a marker is kept, in ms
-- ARGV[4..] entries: per entry, its marker, its field count n, then n field/value pairs
--
-- Returns how many entries were appended.
local STREAM, SEEN = KEYS[1], KEYS[2]
local now, maxlen, ttl = ARGV[1], ARGV[2], ARGV[3]
--#include _emit
return n
