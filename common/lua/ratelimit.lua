-- ratelimit.lua: take up to WANT units of one scope's per-second budget.
--
-- KEYS[1]  <prefix>rl:<scope>:<epoch_s>  (the caller names the second)
-- KEYS[2]  optional: a paced task's stats HASH (hr_key_pace_rl names
--          KEYS[1] in the same slot); its 'planned_rate', when set and
--          lower, is the limit (finish_by pacing, docs/scheduling.md)
-- ARGV[1]  limit (> 0), ARGV[2] want (>= 0)
-- Returns the grant, 0..want.  Reading, adding and setting the expiry
-- happen in one script, so the grants of one second never add up to more
-- than the limit and the counter never lives without a TTL.
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
if KEYS[2] then
  local planned = tonumber(redis.call('HGET', KEYS[2], 'planned_rate') or '0')
  if planned and planned > 0 and planned < limit then
    limit = planned
  end
end
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.min(want, math.max(0, limit - used))
if grant > 0 then
  redis.call('INCRBY', KEYS[1], grant)
  redis.call('PEXPIRE', KEYS[1], 2000)
end
return grant
