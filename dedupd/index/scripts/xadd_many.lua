-- xadd_many: XADDs every entry (ids chosen by Redis).
--
-- KEYS[1] STREAM: the input stream
-- ARGV[1..] entries: per entry, its field count n, then n field/value pairs
--
-- Returns how many entries were added.
local STREAM = KEYS[1]
local i, n = 1, 0
while i <= #ARGV do
  local count = tonumber(ARGV[i])
  local args = {'XADD', STREAM, '*'}
  for j = i + 1, i + 2 * count do args[#args + 1] = ARGV[j] end
  redis.call(unpack(args))
  i = i + 1 + 2 * count
  n = n + 1
end
return n
