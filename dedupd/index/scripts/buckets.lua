-- buckets: a batch's band buckets joined, read and left, and (single Redis) its records checked and written in
-- the same call, so that two consumers changing one document cannot interleave.
--
-- Band buckets: each bucket is a field (the low 32 bits of the band hash; the hash key holds its top bits) of a
-- Redis hash holding, as its value, the packed little-endian uint32 ids of the documents in it.
--
-- KEYS[1..] keys: the bucket hashes (KEYS[i] = bucket hash i; Redis Cluster, one slot per call) when ends is
--   ''; else the records the CHECK* ops check (single Redis)
-- ARGV[1] ops: one op code per op (lua.Op)
-- ARGV[2] kidx: per JOIN/REJOIN/LEAVE op, its bucket hash index (uint32 LE, 1-based)
-- ARGV[3] fields: per such op, the field (4 bytes)
-- ARGV[4] ids: per such op, the id (4 bytes)
-- ARGV[5] ckidx: per CHECK* op, the record's key index in KEYS (uint32 LE)
-- ARGV[6] blob: single Redis: the bucket hash names concatenated ('' on a Redis Cluster)
-- ARGV[7] ends: '' when KEYS holds the bucket hashes; else 0 and the end of each name (uint32 LE): bucket hash
--   i is blob[ends[i]+1 .. ends[i+1]] (single Redis: two arguments instead of thousands of keys to pack and
--   parse per batch)
-- ARGV[8] full: the most members a bucket takes (a full bucket is read but not joined: its members already
--   collide in that band, and the document is found through them); bound as bytes (4 per member)
-- ARGV[9] crowd: the members of one cluster a bucket keeps (bounds.KEPT_PER_CLUSTER: its anchor and its
--   newest): a join of a bucket that held as many already is a hit (it may crowd its cluster; see the
--   reply); bound as bytes
-- ARGV[10] fresh: the most new members a bucket takes in this call ('0': no such bound; one more in a bucket
--   the call made: its first member counts as there before, as it is read by the later joins); a JOIN beyond
--   them is refused, a hit marked so: once the batch is verified lua.EVICT puts the document in (it is the
--   newest of its cluster there, or it has no cluster) or not (the bucket keeps newer ones of its cluster). A
--   batch of copies thus adds a few members to their crowded buckets, not one each until they are full. Bound
--   as bytes
-- ARGV[11..] checks: per CHECK* op, the input entry id the record was read with ('' = no record) and the new
--   record ('' for CHECK_DELETE/CHECK)
--
-- A JOIN reads the members the bucket had before this call: the documents of the batch see each other in the
-- batch itself (processor: the nearest earlier ones with a band hash in common), so that a batch of copies
-- costs each of them the few members kept from before, not everything the batch put there.
-- A REJOIN (a redelivered document) reads the members that joined before it, or when it is not in the bucket
-- any more (evicted: lua.EVICT) the members with a smaller integer id (created before it).
--
-- Returns one string per END: the packed ids found in the buckets that document joined (before it), or '!'
-- when its record had changed since it was read (nothing of that document was written); then one more string:
-- the positions (uint32 LE, 1-based among the call's JOIN/REJOIN/LEAVE ops; the refused bit REFUSED_BIT set
-- for a refused JOIN, FULL_BIT for a JOIN of a full bucket, which the document did not join) of the hits: the
-- joins of a bucket that held crowd members or more (where the document may crowd its cluster: lua.EVICT;
-- where a document kept out of most of its buckets takes a place: lua.DISPLACE). Each bucket holds at most full members, so a call's work is bounded by
-- its ops, whatever the size of a cluster.
local ops, kidx, fields, ids, ckidx = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local blob, ends, full, crowd = ARGV[6], ARGV[7], 4 * tonumber(ARGV[8]), 4 * tonumber(ARGV[9])
local fresh = 4 * tonumber(ARGV[10])
--#include _entry_of
--#include _find_member
local REFUSED, FULL = {{REFUSED_BIT}}, {{FULL_BIT}}
local unpack4, pack4, sub, byte, call = struct.unpack, struct.pack, string.sub, string.byte, redis.call
local named = ends ~= ''
local JOIN, REJOIN, LEAVE, END = {{OP_JOIN}}, {{OP_REJOIN}}, {{OP_LEAVE}}, {{OP_END}}
local WRITE, DELETE = {{OP_CHECK_WRITE}}, {{OP_CHECK_DELETE}}
local out, acc, n_acc = {}, {}, 0
local hits, n_hits = {}, 0  -- the hits' positions, packed once at the end (a flood's copies hit every join)
local before = {}  -- hash name -> field -> bytes of the members it had before this call (a JOIN reads only those)
-- hash name -> field -> the bucket's value as this call left it, for the buckets this call read (a flood's
-- copies join the same buckets: one HSETNX and HGET per bucket and call, not per copy); not for the buckets
-- it made (a batch of different documents would only fill the table)
local known = {}
local names = {}  -- bucket hash index -> its name (single Redis)
local j, c, skip = 0, 0, false
local id
for i = 1, #ops do
  local op = byte(ops, i)
  if op == JOIN or op == REJOIN or op == LEAVE then
    local at4 = 4 * j
    j = j + 1
    if not skip then
      local b1, b2, b3, b4 = byte(kidx, at4 + 1, at4 + 4)  -- the key's index (uint32 LE)
      local k = b1 + 256 * b2 + 65536 * b3 + 16777216 * b4
      local key
      if named then  -- (a flood's copies use the same few names: cut once per call)
        key = names[k]
        if not key then
          local a, b = unpack4('<I4I4', ends, 4 * k - 3)
          key = sub(blob, a + 1, b)
          names[k] = key
        end
      else
        key = KEYS[k]
      end
      local field = sub(fields, at4 + 1, at4 + 4)
      if not id then id = sub(ids, at4 + 1, at4 + 4) end  -- one document's ops share its id
      local kf = known[key]
      if op ~= LEAVE then
        local v = kf and kf[field]
        if not v and call('HSETNX', key, field, id) == 0 then  -- the bucket exists: read it
          v = call('HGET', key, field)
          if not kf then kf = {}; known[key] = kf end
          kf[field] = v
        end
        if v then  -- join it
          local at = find(v, id)
          local bk = before[key]  -- (a bucket this call made: its first member is read too)
          if not bk then bk = {}; before[key] = bk end
          local old = bk[field]
          if not old then old = #v; bk[field] = old end
          local refused = not at and op == JOIN and #v < full and fresh > 0 and #v - old >= fresh
          if refused then
            n_hits = n_hits + 1; hits[n_hits] = j + REFUSED
          elseif not at and #v >= full then  -- full: not joined (lua.DISPLACE may put it in; a redelivery too)
            n_hits = n_hits + 1; hits[n_hits] = j + FULL
          elseif #v >= crowd then
            n_hits = n_hits + 1; hits[n_hits] = j
          end
          n_acc = n_acc + 1
          if at then  -- already in it: JOIN reads the others, REJOIN only the ones that joined before it
            acc[n_acc] = op == JOIN and (sub(v, 1, at - 1) .. sub(v, at + 4)) or sub(v, 1, at - 1)
          elseif op == JOIN then  -- the members of this call's batch it sees in the batch itself
            acc[n_acc] = sub(v, 1, old)
            if #v < full and not refused then v = v .. id; call('HSET', key, field, v); kf[field] = v end
          else  -- REJOIN of a document no longer in it (a newer one evicted it): only the older ids
            local own, older = unpack4('<I4', id), {}
            for p = 1, #v, 4 do
              if unpack4('<I4', v, p) < own then older[#older + 1] = sub(v, p, p + 3) end
            end
            acc[n_acc] = table.concat(older)
            if #v < full then v = v .. id; call('HSET', key, field, v); kf[field] = v end
          end
        end
      else
        local v = call('HGET', key, field)
        local at = v and (v == id and 1 or find(v, id))
        if at then
          if #v == 4 then
            call('HDEL', key, field)
          else
            call('HSET', key, field, sub(v, 1, at - 1) .. sub(v, at + 4))
          end
          if kf then kf[field] = nil end  -- (read again when joined again)
          -- a later JOIN reads the members the bucket had before this call: those this call left are gone
          -- (a bucket no JOIN read yet needs nothing: the JOIN takes its length then)
          local bk = before[key]
          local old = bk and bk[field]
          if old and at <= old then bk[field] = old - 4 end
        end
      end
    end  -- skip: this document's record changed: leave its buckets alone
  elseif op == END then
    if skip then out[#out + 1] = '!' else out[#out + 1] = table.concat(acc) end
    if n_acc > 0 then acc, n_acc = {}, 0 end
    skip = false
    id = nil
  else
    local key = KEYS[unpack4('<I4', ckidx, 4 * c + 1)]
    local expected, record = ARGV[11 + 2 * c], ARGV[12 + 2 * c]
    c = c + 1
    if entry_of(call('GET', key)) ~= expected then
      skip = true
    elseif op == WRITE then
      call('SET', key, record)
    elseif op == DELETE then
      call('DEL', key)
    end
  end
end
local packed = {}
for s = 1, n_hits, 1000 do  -- (unpack's arguments go on Lua's stack: a thousand at a time)
  local e = math.min(s + 999, n_hits)
  packed[#packed + 1] = pack4('<' .. string.rep('I4', e - s + 1), unpack(hits, s, e))
end
out[#out + 1] = table.concat(packed)
return out
