-- rebuild_switch: makes the next generation current and lifts the pause, only while the daemons are paused
-- for it and the lease is this rebuild's.
--
-- KEYS[1] META: the meta hash (keys.meta; its fields: keys.Meta)
-- KEYS[2] LEASE: the rebuild lease (keys.rebuild_lease)
-- KEYS[3] PAUSE: the pause key (keys.pause)
-- ARGV[1] token: this rebuild's token
--
-- Returns 1; 0 not the owner (aborted); -1 the pause expired (daemons may have written since: pause again and
-- re-check).
local META, LEASE, PAUSE = KEYS[1], KEYS[2], KEYS[3]
local token = ARGV[1]
if redis.call('GET', LEASE) ~= token then return 0 end
local nspec = redis.call('HGET', META, '{{META_NEXT_SPEC}}')
local ngen = redis.call('HGET', META, '{{META_NEXT_GEN}}')
if not nspec or not ngen then return 0 end
if redis.call('GET', PAUSE) ~= ngen then return -1 end
redis.call('HSET', META, '{{META_SPEC}}', nspec, '{{META_GEN}}', ngen)
redis.call('HDEL', META, '{{META_NEXT_SPEC}}', '{{META_NEXT_GEN}}', '{{META_NEXT_MODE}}', '{{META_NEXT_CUT}}')
redis.call('DEL', PAUSE)
return 1
