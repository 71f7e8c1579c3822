-- find_roots: the root of each id's cluster (read only).
--
-- KEYS[1] UF: the union-find parent hash (keys.uf_parent)
-- ARGV[1..] nums: integer ids
--
-- Returns the root of each one's cluster.
local UF = KEYS[1]
--#include _uf_parents
local out = {}
for i = 1, #ARGV do out[i] = tonumber((walk(ARGV[i]))) end
return out
