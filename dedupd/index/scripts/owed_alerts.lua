-- owed_alerts: changes the alerts a rebuild owes (generations.OwedAlerts, in the meta hash) only while they are
-- still those of the given generation: a later rebuild may have switched and recorded its own meanwhile
-- (generation numbers are never given out twice).
--
-- KEYS[1] META: the meta hash (keys.meta)
-- ARGV[1] gen: the generation whose debt this changes
-- ARGV[2] owed: the debt's new record (JSON), or '' once it is paid (the field is deleted)
--
-- Returns 1 when it changed the record, 0 when the field holds another generation's debt or none.
local META = KEYS[1]
local gen, owed = tonumber(ARGV[1]), ARGV[2]
local cur = redis.call('HGET', META, '{{META_OWED_ALERTS}}')
if not cur or tonumber(cjson.decode(cur)['gen']) ~= gen then return 0 end
if owed == '' then
  redis.call('HDEL', META, '{{META_OWED_ALERTS}}')
else
  redis.call('HSET', META, '{{META_OWED_ALERTS}}', owed)
end
return 1
