-- read: reads entries for the consumer, bounded in bytes (an entry's size: its field names and values
-- together): an entry larger than maxentry comes back cut to about keep bytes (its document id field first,
-- then the other fields in order) with the cut field holding its full size, so that no entry reaches the
-- daemon whole when it is larger than the bound.
--
-- KEYS[1] STREAM: the input stream (keys.docs)
-- KEYS[2] INFLIGHT: its in-flight hash (keys.inflight)
-- KEYS[3] INFLIGHT_N: its in-flight count (keys.inflight_count)
-- ARGV[1] group: the consumer group
-- ARGV[2] consumer: the consumer
-- ARGV[3] mode: 'new', 'own', 'again' or 'claim' (below)
-- ARGV[4] from: 'own', 'again': the id after which to read; 'claim': the entry to claim
-- ARGV[5] count: the most entries
-- ARGV[6] budget: 'new': the most bytes together, each entry counted at most maxentry
-- ARGV[7] maxentry: the largest entry returned whole
-- ARGV[8] keep: about how many bytes an entry cut short keeps
-- ARGV[9] maxid: the longest accepted document id
-- ARGV[10] cutname: the cut field's name
--
-- mode 'new': new entries (XREADGROUP '>'), at most count and, counting each at most maxentry, at most
--   budget bytes together; recorded as in flight at once. Never blocks.
-- mode 'own': the consumer's own pending entries after the id from (at most count); a deleted one as
--   (id, false). Each read counts one delivery more (a restart after a crash: the entry was being processed).
-- mode 'again': the same, read again after a server error, with each entry's delivery count left as it was
--   (the server's state, not the entry, stopped its processing: XCLAIM ... RETRYCOUNT puts the count back).
-- mode 'claim': claims the pending entry from (XCLAIM, idle 0) and returns it.
-- Returns the entries, {id, flat field list} each.
local STREAM, INFLIGHT, INFLIGHT_N = KEYS[1], KEYS[2], KEYS[3]
local group, consumer, mode, from = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local count, budget, maxentry, keep = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
local maxid, cutname = tonumber(ARGV[9]), ARGV[10]
--#include _registry
local function bounded(fields)  -- the fields (or cut ones) and the size they count for
  local size = 0
  for i = 1, #fields do size = size + #fields[i] end
  if size <= maxentry then return fields, size end
  local out, room = {}, keep
  local function put(k, v)
    if #k > room then return end
    local n = math.min(#v, room - #k)
    out[#out + 1] = k
    out[#out + 1] = string.sub(v, 1, n)
    room = room - #k - n
  end
  for i = 1, #fields, 2 do if fields[i] == '{{DOC_ID_FIELD}}' then put(fields[i], fields[i + 1]) break end end
  for i = 1, #fields, 2 do if fields[i] ~= '{{DOC_ID_FIELD}}' then put(fields[i], fields[i + 1]) end end
  out[#out + 1] = cutname
  out[#out + 1] = tostring(size)
  return out, maxentry
end
local out = {}
local function take(entries)
  local used, n = 0, 0
  for _, e in ipairs(entries or {}) do
    if e[2] then
      local fields, size = bounded(e[2])
      out[#out + 1] = {e[1], fields}
      used = used + size
      if mode == 'new' then n = n + add(e[1], doc_of(fields, maxid)) end
    else
      out[#out + 1] = {e[1], false}
    end
  end
  return used, n
end
if mode == 'new' then
  keep_hashtable()
  local used, added = 0, 0
  while #out < count do
    local k = math.min(count - #out, math.floor((budget - used) / maxentry))
    if k < 1 then break end
    local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', k, 'STREAMS', STREAM, '>')
    if not got then break end
    local size, n = take(got[1][2])
    used, added = used + size, added + n
    if #got[1][2] < k then break end
  end
  if added > 0 then redis.call('INCRBY', INFLIGHT_N, added) end
elseif mode == 'own' or mode == 'again' then
  local counts = {}
  if mode == 'again' then
    for _, p in ipairs(redis.call('XPENDING', STREAM, group, '(' .. from, '+', count, consumer)) do
      counts[p[1]] = p[4]
    end
  end
  local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count, 'STREAMS', STREAM, from)
  if got then
    take(got[1][2])
    for _, e in ipairs(got[1][2]) do
      if e[2] and counts[e[1]] then
        redis.call('XCLAIM', STREAM, group, consumer, 0, e[1], 'RETRYCOUNT', counts[e[1]], 'JUSTID')
      end
    end
  end
else
  take(redis.call('XCLAIM', STREAM, group, consumer, 0, from))
end
return out
