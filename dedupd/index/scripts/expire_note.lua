-- expire_note: the document ids of claimed documents, read from their records before these are deleted
-- (retention.py): a daemon that takes a lapsed claim over after the record went forgets the id with it.
--
-- KEYS[1] EXPIRING: the documents being expired, integer id -> when the claim lapses (keys.expiring)
-- KEYS[2] EXPIDS: the document ids noted for them (keys.expiring_ids)
-- ARGV[1] deadline: the claim's deadline (expire_claim.lua): only documents still claimed with it are noted
-- ARGV[2..] notes: pairs (integer id, document id)
--
-- Returns how many were noted.
local EXPIRING, EXPIDS = KEYS[1], KEYS[2]
local deadline = tonumber(ARGV[1])
local noted = 0
for i = 2, #ARGV, 2 do
  if tonumber(redis.call('ZSCORE', EXPIRING, ARGV[i]) or '-1') == deadline then
    redis.call('HSET', EXPIDS, ARGV[i], ARGV[i + 1])
    noted = noted + 1
  end
end
return noted
