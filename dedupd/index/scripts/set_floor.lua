-- set_floor: sets the union-find floor once, to the last integer id given out (0 for a new index): the nodes
-- of the ids given out before are not counted.
--
-- KEYS[1] FLOOR: the floor (keys.uf_floor)
-- KEYS[2] SEQ: the integer id counter (keys.id_seq)
-- ARGV: none
--
-- Returns the floor.
local FLOOR, SEQ = KEYS[1], KEYS[2]
redis.call('SET', FLOOR, redis.call('GET', SEQ) or '0', 'NX')
return tonumber(redis.call('GET', FLOOR))
