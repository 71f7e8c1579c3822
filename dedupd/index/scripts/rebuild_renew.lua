-- rebuild_renew: renews the rebuild lease if it is still this rebuild's.
--
-- KEYS[1] META: the meta hash (keys.meta; not touched)
-- KEYS[2] LEASE: the rebuild lease (keys.rebuild_lease)
-- ARGV[1] token: this rebuild's token
-- ARGV[2] lease_ms: how long the lease lives from now unless renewed
--
-- Returns 1, else 0 (aborted or taken over).
local META, LEASE = KEYS[1], KEYS[2]
local token, lease_ms = ARGV[1], ARGV[2]
if redis.call('GET', LEASE) ~= token then return 0 end
redis.call('PEXPIRE', LEASE, lease_ms)
return 1
