-- resolve_ids: document ids to integer ids, created on demand unless a newer delete's tombstone says no. It
-- touches nothing (a retention window: an entry touches its document only when it is written, touch.lua, so
-- an entry that is then refused or dead-lettered keeps no document alive). An id given out here to a document
-- then refused before anything of it is written is released again (release_ids.lua).
--
-- KEYS[1] FWD: the id map, document id -> integer id (keys.id_forward)
-- KEYS[2] SEQ: the integer id counter (keys.id_seq)
-- KEYS[3] TOMB: the tombstones, document id -> '<version> <n>' (keys.tombstones)
-- KEYS[4] EXPIRING: the documents being expired, integer id -> when the claim lapses (keys.expiring)
-- ARGV[1..] requests: triples (mode, id, entry id), mode "a" = get or assign, "g" = get only
--
-- Returns per id: n (existing), -n (newly assigned), 0 (unknown: get only, or a tombstone at least as new as
-- the entry), then the id's tombstone ('<version> <n>', '' = none), then 1 when its document is being
-- expired (its entry waits: nothing is assigned), else 0. A deleted id is not re-created by an
-- entry older than its delete.
local FWD, SEQ, TOMB, EXPIRING = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
--#include _stream_id
local expiring = redis.call('EXISTS', EXPIRING) == 1
local out = {}
for i = 1, #ARGV, 3 do
  local mode, id, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local n = redis.call('HGET', FWD, id)
  local tomb = redis.call('HGET', TOMB, id) or ''
  local waits = 0
  if n and expiring and redis.call('ZSCORE', EXPIRING, n) then
    waits = 1
    out[#out + 1] = tonumber(n)
  elseif n then
    out[#out + 1] = tonumber(n)
  elseif mode ~= 'g' and (tomb == '' or newer(entry, tomb)) then
    n = redis.call('INCR', SEQ)
    redis.call('HSET', FWD, id, n)
    out[#out + 1] = -n
  else
    out[#out + 1] = 0
  end
  out[#out + 1] = tomb
  out[#out + 1] = waits
end
return out
