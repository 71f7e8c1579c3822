-- record_cas: the record check of buckets alone, for Redis Cluster (a record and its buckets live in other
-- slots; see cluster_records.py).
--
-- KEYS[1] RECORD: the document's record (keys.doc)
-- KEYS[2] LEAVING: its leaving key (keys.leaving: same slot)
-- ARGV[1] op: an Op CHECK* code
-- ARGV[2] expected: the input entry id the record was read with ('' = no record)
-- ARGV[3] record: the new record
-- ARGV[4] leave: the packed band hashes of the buckets this write leaves ('' = none)
--
-- Returns {0, ''} when the record changed since it was read (nothing written); else {1, the band hashes
-- earlier writes left to leave ('' = none)}, and a write adds its own to them.
local RECORD, LEAVING = KEYS[1], KEYS[2]
local op, expected, record, leave = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
--#include _entry_of
if entry_of(redis.call('GET', RECORD)) ~= expected then return {0, ''} end
local left = redis.call('GET', LEAVING) or ''
if op == '{{OP_CHECK_WRITE_CHAR}}' then
  redis.call('SET', RECORD, record)
  if leave ~= '' then redis.call('SET', LEAVING, left .. leave) end
elseif op == '{{OP_CHECK_DELETE_CHAR}}' then redis.call('DEL', RECORD) end
return {1, left}
