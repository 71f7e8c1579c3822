-- rebuild_begin: records the target spec as the next generation (a new generation number) and takes the
-- rebuild lease, or resumes the unfinished rebuild towards it; compare-and-set on the lease's token, so two
-- rebuilds cannot both run.
--
-- KEYS[1] META: the meta hash (keys.meta; its fields: keys.Meta)
-- KEYS[2] LEASE: the rebuild lease, the running rebuild's token (keys.rebuild_lease: the meta hash's slot)
-- ARGV[1] token: this rebuild's token
-- ARGV[2] lease_ms: how long the lease lives unless renewed
-- ARGV[3] target: the target spec (JSON)
-- ARGV[4] mode: how the rebuild fills the generation
-- ARGV[5] cut: where its replay of the input stream began
--
-- Returns {outcome, detail}: {'none', ''} no index, {'running', owner} another rebuild holds the lease,
-- {'other', its target} an unfinished rebuild towards another target, {'resumed', its mode}, {'same', ''}
-- the index already has the target spec, {'began', ''}.
local META, LEASE = KEYS[1], KEYS[2]
local token, lease_ms, target, mode, cut = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local spec = redis.call('HGET', META, '{{META_SPEC}}')
if not spec then return {'none', ''} end
local owner = redis.call('GET', LEASE)
if owner and owner ~= token then return {'running', owner} end
local nxt = redis.call('HGET', META, '{{META_NEXT_SPEC}}')
if nxt then
  if nxt ~= target then return {'other', nxt} end
  redis.call('SET', LEASE, token, 'PX', lease_ms)
  return {'resumed', redis.call('HGET', META, '{{META_NEXT_MODE}}') or ''}
end
if spec == target then return {'same', ''} end
-- generation numbers only go up: an aborted rebuild's number is never used again
local gen = math.max(tonumber(redis.call('HGET', META, '{{META_GEN}}') or '0'),
                     tonumber(redis.call('HGET', META, '{{META_LAST_GEN}}') or '0')) + 1
redis.call('HSET', META, '{{META_LAST_GEN}}', gen)
redis.call('HSET', META, '{{META_NEXT_SPEC}}', target, '{{META_NEXT_GEN}}', gen, '{{META_NEXT_MODE}}', mode,
           '{{META_NEXT_CUT}}', cut)
redis.call('SET', LEASE, token, 'PX', lease_ms)
return {'began', ''}
