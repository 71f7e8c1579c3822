-- versions: each record's input entry id, without the records.
--
-- KEYS[1..] records: document records (keys.doc)
-- ARGV: none
--
-- Returns each record's input entry id ('' = no record).
--#include _entry_of
local out = {}
for i = 1, #KEYS do out[i] = entry_of(redis.call('GET', KEYS[i])) end
return out
