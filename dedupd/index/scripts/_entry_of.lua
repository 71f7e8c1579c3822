-- _entry_of (fragment): entry_of(blob), the input entry id stored in a packed record ('' = no record).
-- record.py: the header (record.HEADER, its fields record.HEADER_FIELDS), the signature of num_perm uint32
-- values, then the id, the tail and the input entry id. Reads no KEYS or ARGV.
local function entry_of(blob)
  if not blob then return '' end
  local h = {struct.unpack('{{RECORD_HEADER}}', blob)}
  local at = {{RECORD_BODY}} + 4 * h[{{RECORD_NUM_PERM}}] + h[{{RECORD_ID_LEN}}] + h[{{RECORD_TAIL_LEN}}]
  return string.sub(blob, at, at + h[{{RECORD_ENTRY_LEN}}] - 1)
end
