-- release_ids: ids given out for documents that were then refused before anything of them was written (their
-- document would be stored larger than max_stored_bytes): each is forgotten while it still maps to the
-- integer id given, as if it had never been resolved (else a producer could grow the id map without bound).
-- Nothing else holds such an id (no record, bucket, union-find node, touch time or tombstone): nothing else
-- is undone.
--
-- KEYS[1] FWD: the id map, document id -> integer id (keys.id_forward)
-- ARGV[1..] released: pairs (id, n)
--
-- Returns how many ids were forgotten.
local FWD = KEYS[1]
local released = 0
for i = 1, #ARGV, 2 do
  local id, n = ARGV[i], ARGV[i + 1]
  if redis.call('HGET', FWD, id) == n then
    redis.call('HDEL', FWD, id)
    released = released + 1
  end
end
return released
