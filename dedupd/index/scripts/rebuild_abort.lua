-- rebuild_abort: forgets an unfinished rebuild (its runner stops at its next step), its lease and any pause.
--
-- KEYS[1] META: the meta hash (keys.meta; its fields: keys.Meta)
-- KEYS[2] LEASE: the rebuild lease (keys.rebuild_lease)
-- KEYS[3] PAUSE: the pause key (keys.pause)
-- ARGV: none
--
-- Returns the generation it was building, or false.
local META, LEASE, PAUSE = KEYS[1], KEYS[2], KEYS[3]
local ngen = redis.call('HGET', META, '{{META_NEXT_GEN}}')
redis.call('HDEL', META, '{{META_NEXT_SPEC}}', '{{META_NEXT_GEN}}', '{{META_NEXT_MODE}}', '{{META_NEXT_CUT}}')
redis.call('DEL', LEASE, PAUSE)
return ngen
