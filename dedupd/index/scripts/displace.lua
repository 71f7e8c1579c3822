-- displace: documents a full bucket kept out (lua.BUCKETS' FULL_BIT hits) take a place in it, so that no
-- arrival order leaves a document findable nowhere: a crowd of other documents that filled a document's buckets
-- before it came, or a hub's later spokes that found every bucket they share with the hub full.
--
-- Single Redis (deficits given): each document's deficit is kept, how many of its buckets it is not in because
-- they were full or it gave up its place there. A document kept out of a full bucket takes the place of the
-- member there with the smallest deficit when that is at least 2 below its own (the move evens them out; ties
-- are broken by the two ids), so the places of a crowded neighbourhood are shared out evenly, whatever the order
-- its documents came in, and a document's later crowd can take from it no more than from any of its members.
-- Redis Cluster (deficits ''): the deficits would live in another slot; the daemon sends only the rows of
-- documents kept out of most of their buckets (bounds.thin), and each takes a place, the member giving it up
-- picked by the two ids.
-- A member this call put in never gives up its place in the same call.
--
-- KEYS[1..] buckets: bucket hashes (single Redis: then the deficits hash, KEYS[#KEYS])
-- Per row (a document and one of its full buckets; one document's rows together):
-- ARGV[1] kidx: per row, its bucket hash's index in KEYS (uint32 LE, 1-based)
-- ARGV[2] fields: per row, the field (4 bytes)
-- ARGV[3] docs: per row, the document (4 bytes)
-- ARGV[4] full: the most members a bucket takes
-- ARGV[5] deficits: '1' when KEYS[#KEYS] is the deficits hash (keys.deficits), '' on a Redis Cluster
--
-- Returns how many members gave up their place.
local kidx, fields, docs, full, deficits = ARGV[1], ARGV[2], ARGV[3], 4 * tonumber(ARGV[4]), ARGV[5]
local DEF = deficits ~= '' and KEYS[#KEYS] or nil
local unpack4, sub, call = struct.unpack, string.sub, redis.call
--#include _find_member
local deficit, changed = {}, {}  -- member -> its deficit (read once), and those this call changed
local function deficit_of(m)
  local d = deficit[m]
  if d == nil then d = tonumber(call('HGET', DEF, m) or '0'); deficit[m] = d end
  return d
end
local function pick(doc, field, n)  -- a position 1..n picked by the two ids
  return ((unpack4('<I4', doc) % 65521) * 65519 + unpack4('<I4', field) % 65521) % n + 1
end
if DEF then  -- a document's deficit is at least the rows it is kept out of (a redelivery: the same rows
  local kept_out, order = {}, {}  -- again, not counted twice)
  for at = 1, #fields, 4 do
    local doc = sub(docs, at, at + 3)
    if not kept_out[doc] then kept_out[doc] = 0; order[#order + 1] = doc end
    local v = call('HGET', KEYS[(unpack4('<I4', kidx, at))], sub(fields, at, at + 3))
    if v and #v >= full and not find(v, doc) then kept_out[doc] = kept_out[doc] + 1 end
  end
  for _, doc in ipairs(order) do
    if kept_out[doc] > deficit_of(doc) then deficit[doc] = kept_out[doc]; changed[doc] = true end
  end
end
local placed, n = {}, 0  -- key .. field .. member -> true: put in by this call
for at = 1, #fields, 4 do
  local key, field, doc = KEYS[(unpack4('<I4', kidx, at))], sub(fields, at, at + 3), sub(docs, at, at + 3)
  local v = call('HGET', key, field)
  if not v then
    call('HSET', key, field, doc)
  elseif not find(v, doc) then
    local fell = #v >= full
    if #v == full then  -- give up one member's place (not one this call put in; an over-full one: none)
      local count, give = #v / 4, nil
      local start = pick(doc, field, count)
      local low = DEF and deficit[doc] - 1 or nil  -- (with deficits: only a member at least 2 below)
      for i = 0, count - 1 do
        local p = 4 * ((start - 1 + i) % count) + 1
        local m = sub(v, p, p + 3)
        if not placed[key .. field .. m] then
          if not DEF then give = p; break end
          local d = deficit_of(m)
          if d < low then give, low = p, d end
        end
      end
      if give then
        local m = sub(v, give, give + 3)
        v = sub(v, 1, give - 1) .. sub(v, give + 4)
        n = n + 1
        if DEF then deficit[m] = deficit[m] + 1; changed[m] = true end
      end
    end
    if #v < full then
      call('HSET', key, field, v .. doc)
      placed[key .. field .. doc] = true
      if DEF and fell then deficit[doc] = deficit[doc] - 1; changed[doc] = true end
    end
  end
end
if DEF then
  for m in pairs(changed) do
    local d = deficit[m]
    if d > 0 then call('HSET', DEF, m, d) else call('HDEL', DEF, m) end
  end
end
return n
