-- ratelimit.lua: take up to WANT units of one scope's budget in one window.
--
-- KEYS[1]  <prefix>rl:<scope>:<window>  (the caller names the window: the
--          epoch second, or epoch_s / 60 for a per-minute budget)
-- ARGV[1]  limit (> 0), ARGV[2] want (>= 0), ARGV[3] the counter's expiry
--          in ms (the window and a second)
-- Returns the grant, 0..want.  Reading, adding and setting the expiry
-- happen in one script, so the grants of one window never add up to more
-- than the limit and the counter never lives without a TTL.
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.min(want, math.max(0, limit - used))
if grant > 0 then
  redis.call('INCRBY', KEYS[1], grant)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
end
return grant
