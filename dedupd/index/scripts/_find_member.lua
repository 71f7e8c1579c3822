-- _find_member (fragment): find(v, id), the position of a member (a 4-byte id) in a bucket's packed value,
-- nil when it is not there. Reads no KEYS or ARGV.
local sfind = string.find
local function find(v, id)
  local from = 1
  while true do
    local s = sfind(v, id, from, true)
    if not s then return nil end
    if (s - 1) % 4 == 0 then return s end
    from = s + 1
  end
end
