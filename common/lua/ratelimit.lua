-- ratelimit.lua: take up to WANT units of one scope's budget in one window.
--
-- KEYS[1]  <prefix>rl:<scope>:<window>  (the caller names the window: the
--          epoch second, or epoch_s / 60 for a per-minute budget)
-- ARGV[1]  limit (> 0), ARGV[2] want (>= 0), ARGV[3] the counter's expiry
--          in ms (the window and a second)
-- Returns the grant, 0..want.  Reading, adding and setting the expiry
-- happen in one script, so the grants of one window never add up to more
-- than the limit and the counter never lives without a TTL.
--
-- Paced (a task with a finish_by, docs/scheduling.md; one-second windows):
-- KEYS[1] is the task's own counter (hr_key_pace_rl, in the task's slot),
-- KEYS[2] its stats HASH, KEYS[3] its subs SET; ARGV[1] the cap (0 = none),
-- ARGV[4] finish_by and ARGV[5] now (ms).  The limit is the rate that ends
-- what is left (not chunked + chunked and not settled) by finish_by,
-- derived at every grant so the plan corrects itself when pushes lag:
-- ceil(left / (seconds left + 1)) (a second's pushes start when it
-- begins, so the seconds at both ends count; hr_pace_rate is the same
-- formula), at least 1, at most the cap; once finish_by passed, the cap.
-- The rate in force goes to the stats hash's planned_rate (0 = none: as
-- fast as the cap allows) and is returned: {grant, rate}.
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local paced = KEYS[2] ~= nil
local rate = 0
if paced then
  local finish, now = tonumber(ARGV[4]), tonumber(ARGV[5])
  local v = redis.call('HMGET', KEYS[2], 'published', 'sent', 'failed', 'throttled', 'cancelled',
                       'unregistered', 'expired', 'opted_out', 'suppressed', 'planned_rate')
  rate = limit
  if finish > now then
    local settled = 0
    for i = 2, 9 do
      settled = settled + (tonumber(v[i]) or 0)
    end
    local left = redis.call('SCARD', KEYS[3]) + math.max(0, (tonumber(v[1]) or 0) - settled)
    rate = math.max(1, math.ceil(left * 1000 / (finish - now + 1000)))
    if limit > 0 and limit < rate then
      rate = limit
    end
  end
  if tonumber(v[10]) ~= rate then
    redis.call('HSET', KEYS[2], 'planned_rate', rate)
  end
  if rate == 0 then
    return {want, 0} -- no cap and finish_by passed: nothing to count against
  end
  limit = rate
end
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local grant = math.min(want, math.max(0, limit - used))
if grant > 0 then
  redis.call('INCRBY', KEYS[1], grant)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
end
if paced then
  return {grant, rate}
end
return grant
