-- rebuild_pause: pauses the daemons (they finish their batch and wait) while the lease is this rebuild's.
--
-- KEYS[1] META: the meta hash (keys.meta; not touched)
-- KEYS[2] LEASE: the rebuild lease (keys.rebuild_lease)
-- KEYS[3] PAUSE: the pause key (keys.pause: the meta hash's slot)
-- ARGV[1] token: this rebuild's token
-- ARGV[2] pause_ms: how long the pause (and the lease) lives
-- ARGV[3] gen: the generation being switched to
--
-- Returns 1, or 0 if not the owner.
local META, LEASE, PAUSE = KEYS[1], KEYS[2], KEYS[3]
local token, pause_ms, gen = ARGV[1], ARGV[2], ARGV[3]
if redis.call('GET', LEASE) ~= token then return 0 end
redis.call('SET', PAUSE, gen, 'PX', pause_ms)
redis.call('PEXPIRE', LEASE, pause_ms)
return 1
