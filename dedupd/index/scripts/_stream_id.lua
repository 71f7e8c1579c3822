-- _stream_id (fragment): stream ids 'ms-seq' compared in Lua (ms < 2**53 is exact in a Lua number).
-- Defines sid(s) and newer(a, b) (a > b); reads no KEYS or ARGV.
local function sid(s)
  local ms, seq = string.match(s, '^(%d+)-(%d+)')  -- a tombstone is 'ms-seq n'
  return tonumber(ms or 0), tonumber(seq or 0)
end
local function newer(a, b)  -- a > b
  local am, as = sid(a)
  local bm, bs = sid(b)
  if am ~= bm then return am > bm end
  return as > bs
end
