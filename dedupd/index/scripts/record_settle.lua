-- record_settle: after the buckets of a record_cas write are written (Redis Cluster). Unless the record changed
-- since: deletes it if asked, and forgets the buckets to leave (they are left).
--
-- KEYS[1] RECORD: the document's record (keys.doc)
-- KEYS[2] LEAVING: its leaving key (keys.leaving: same slot)
-- ARGV[1] version: the input entry id the write left the record at
-- ARGV[2] delete: '1' to delete the record (a delete)
--
-- Returns 1, or 0 when the record changed since.
local RECORD, LEAVING = KEYS[1], KEYS[2]
local version, delete = ARGV[1], ARGV[2]
--#include _entry_of
if entry_of(redis.call('GET', RECORD)) ~= version then return 0 end
if delete == '1' then redis.call('DEL', RECORD) end
redis.call('DEL', LEAVING)
return 1
