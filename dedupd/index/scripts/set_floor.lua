-- set_floor: sets the union-find's floors once, to the last integer id given out (0 for a new index): the nodes
-- of the ids given out before are not counted, and their clusters' rings may lack them (see unionfind.py).
--
-- KEYS[1] FLOOR: the floor of the children counts (keys.uf_floor)
-- KEYS[2] SEQ: the integer id counter (keys.id_seq)
-- KEYS[3] RING_FLOOR: the floor of the rings (keys.uf_ring_floor)
-- ARGV: none
--
-- Returns the floor of the children counts.
local FLOOR, SEQ, RING_FLOOR = KEYS[1], KEYS[2], KEYS[3]
local last = redis.call('GET', SEQ) or '0'
redis.call('SET', FLOOR, last, 'NX')
redis.call('SET', RING_FLOOR, last, 'NX')
return tonumber(redis.call('GET', FLOOR))
