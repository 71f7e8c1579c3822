-- expire_claim: one step of the retention window (retention.py): claims at most limit documents to expire,
-- first the claims of other daemons that lapsed (a daemon killed half way: taken over), then the documents
-- past the window: touched longer ago than age ms, or beyond the count newest touched ones. A claimed
-- document leaves TOUCHED for EXPIRING (its entries wait, resolve_ids.lua) until expire_finish.lua. The work
-- is bounded by limit (sorted-set ranges), never by the backlog.
--
-- KEYS[1] TOUCHED: when each document was last touched, integer id -> ms (keys.touched)
-- KEYS[2] EXPIRING: the documents being expired, integer id -> when the claim lapses (keys.expiring)
-- KEYS[3] EXPIDS: the document ids noted for them (keys.expiring_ids)
-- ARGV[1] age: the window by age in ms ('0': none)
-- ARGV[2] count: the window by count ('0': none)
-- ARGV[3] limit: the most documents this call claims
-- ARGV[4] lease: how long a claim lasts (ms) before another daemon may take it over
--
-- Returns {now, deadline, backlog, oldest, n, id, n, id, ...}: the server's time (ms), the claims' deadline
-- (their token: expire_note and expire_finish act only while it is still theirs), the documents past the
-- window not claimed yet, the oldest touch time left (ms, '' when none), then per claimed document its
-- integer id and the document id noted for it ('' when none: a fresh claim).
local TOUCHED, EXPIRING, EXPIDS = KEYS[1], KEYS[2], KEYS[3]
local age, count, limit, lease = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = now + lease
local out = {now, deadline, 0, ''}
local lapsed = redis.call('ZRANGEBYSCORE', EXPIRING, '-inf', now, 'LIMIT', 0, limit)
for _, n in ipairs(lapsed) do
  redis.call('ZADD', EXPIRING, deadline, n)
  out[#out + 1] = n
  out[#out + 1] = redis.call('HGET', EXPIDS, n) or ''
end
local due = 0
if age > 0 then due = redis.call('ZCOUNT', TOUCHED, '-inf', now - age) end
if count > 0 then due = math.max(due, redis.call('ZCARD', TOUCHED) - count) end
local take = math.min(due, limit - #lapsed)
local taken = 0
if take > 0 then
  local popped = redis.call('ZPOPMIN', TOUCHED, take)
  for i = 1, #popped, 2 do
    redis.call('ZADD', EXPIRING, deadline, popped[i])
    out[#out + 1] = popped[i]
    out[#out + 1] = ''
    taken = taken + 1
  end
end
out[3] = due - taken
out[4] = redis.call('ZRANGE', TOUCHED, 0, 0, 'WITHSCORES')[2] or ''
return out
