-- displace: documents kept out of most of their buckets because they were full (lua.BUCKETS' FULL_BIT hits;
-- bounds.thin) take a place in those buckets: a bucket with room takes the document, a full one gives up one
-- member for it. Without this, a crowd of other documents that filled a document's buckets before it came would
-- leave it in none of them, and no later copy could find it.
--
-- The member given up is picked by the document's and the field's numbers (a deterministic spread: the same call
-- gives up the same members), never one this call put in. It stays in its other buckets: a member of a full
-- bucket that was itself kept out of most of its buckets is rare (it takes a crowd that shares most of its band
-- hashes, i.e. its near-copies, which find it through its cluster).
--
-- KEYS[1..] buckets: bucket hashes
-- Per row (a document and one of its full buckets):
-- ARGV[1] kidx: per row, its bucket hash's index in KEYS (uint32 LE, 1-based)
-- ARGV[2] fields: per row, the field (4 bytes)
-- ARGV[3] docs: per row, the document (4 bytes)
-- ARGV[4] full: the most members a bucket takes
--
-- Returns how many members were given up.
local kidx, fields, docs, full = ARGV[1], ARGV[2], ARGV[3], 4 * tonumber(ARGV[4])
local unpack4, sub, call = struct.unpack, string.sub, redis.call
--#include _find_member
local placed, n = {}, 0  -- key .. field .. member -> true: put in by this call
for at = 1, #fields, 4 do
  local key, field, doc = KEYS[(unpack4('<I4', kidx, at))], sub(fields, at, at + 3), sub(docs, at, at + 3)
  local v = call('HGET', key, field)
  if not v then
    call('HSET', key, field, doc)
  elseif not find(v, doc) then
    if #v >= full then  -- give up one member (not one this call put in)
      local others = {}
      for p = 1, #v, 4 do
        if not placed[key .. field .. sub(v, p, p + 3)] then others[#others + 1] = p end
      end
      if #others > 0 then
        local h = (unpack4('<I4', doc) % 65521) * 65519 + unpack4('<I4', field) % 65521
        local p = others[h % #others + 1]
        v = sub(v, 1, p - 1) .. sub(v, p + 4)
        n = n + 1
      end
    end
    if #v < full then call('HSET', key, field, v .. doc); placed[key .. field .. doc] = true end
  end
end
return n
