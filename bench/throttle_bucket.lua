-- throttle_bucket.lua: the bucketed window layout issue 33 named as the
-- throttle's lever, for bench/throttle_lua.py to measure beside
-- common/lua/throttle.lua (docs/throttle.md "Cost"); herald does not use it.
--
-- Windows of limit 1 only, enough to price a fresh window: one HASH per
-- shard (the uid's last two characters; a real layout would hash the uid)
-- and per bucket of one window's length, field the window's name, value
-- "<tag>:<ms>" as throttle.lua's string.  A pass stamped t counts while
-- now_ms < t + window, so it lies in the current bucket or the one before:
-- the field is written into the current bucket first (HSETNX, one command
-- for a recipient new to it) and undone when the bucket before holds a pass
-- that still counts.  A hash expires two windows after its bucket began,
-- when none of its passes can count: one expiry per hash and call, not one
-- per recipient, which is what the layout was to save.
-- KEYS and ARGV as throttle.lua's; replies verdict + 4 (the count is not
-- kept).
local window = tonumber(ARGV[2])
local tag = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = now - window + 1
local b = math.floor(now / window)
local pass = tag .. ':' .. string.format('%.0f', now)
local cur, prev, expiring = {}, {}, {}
local out = {now}
for i = 1, #KEYS do
  local uid = KEYS[i]
  local shard = string.sub(uid, -2)
  local c = cur[shard]
  if not c then
    c = 'thb:' .. shard .. ':' .. b
    cur[shard] = c
    prev[shard] = 'thb:' .. shard .. ':' .. (b - 1)
  end
  -- Written first (one command for a recipient new to the bucket); undone
  -- when the bucket before holds a pass that still counts.
  local verdict = 1
  local v
  if redis.call('HSETNX', c, uid, pass) == 1 then
    if not expiring[shard] then
      redis.call('PEXPIREAT', c, (b + 2) * window, 'NX')
      expiring[shard] = true
    end
    v = redis.call('HGET', prev[shard], uid)
    if v then
      local otag, ms = string.match(v, '^(.-):(%d+)$')
      if tonumber(ms) >= oldest then
        verdict = otag == tag and 2 or 0
        redis.call('HDEL', c, uid)
      end
    end
  else
    v = redis.call('HGET', c, uid)
    local otag = string.match(v, '^(.-):(%d+)$')
    verdict = otag == tag and 2 or 0
  end
  out[i + 1] = verdict + 4
end
return out
