-- ratelimit.lua: take up to WANT units of one scope's budget in one window.
--
-- KEYS[1]  <prefix>rl:<scope>  HASH {w = the window's number, n = units
--          granted in it}
-- ARGV[1]  limit (> 0), ARGV[2] want (>= 0), ARGV[3] the window in ms
--          (1000, or 60000 for a per-minute budget)
-- Returns {grant (0..want), the ms to the window's end (how long a refused
-- caller waits, and how long the units granted are good for), the paced
-- rate (0 when not paced)}.
--
-- The clock is Redis's (TIME): every caller of a scope draws from the same
-- window whatever its host's clock says (a worker or dispatcher whose
-- clock is off by seconds used to count against a window of its own, so a
-- budget could be spent once per skewed host; docs/architecture.md
-- "Clocks").  Reading, adding and setting the expiry happen in one script,
-- so the grants of one window never add up to more than the limit and the
-- counter never lives without a TTL; a counter of an earlier window counts
-- as 0 and is overwritten.
--
-- Paced (a task with a finish_by, docs/scheduling.md; one-second windows):
-- KEYS[1] is the task's own counter (hr_key_pace_rl, in the task's slot),
-- KEYS[2] its stats HASH, KEYS[3] its subs SET, KEYS[4] its wait ZSET
-- (recipients of a local-time or windowed task not released yet);
-- ARGV[1] the cap (0 = none), ARGV[4] finish_by (ms).  The limit is the
-- rate that ends what is left (not chunked: subs and the wait set; chunked
-- and not settled) by finish_by, derived at every grant so the plan
-- corrects itself when pushes lag: ceil(left / (seconds left + 1)) (a
-- second's pushes start when it begins, so the seconds at both ends count;
-- hr_pace_rate is the same formula), at least 1, at most the cap; once
-- finish_by passed, the cap.  The rate in force goes to the stats hash's
-- planned_rate (0 = none: as fast as the cap allows).  A refusal before
-- finish_by waits at most until finish_by, where the limit rises to the
-- cap.
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local paced = KEYS[2] ~= nil
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wait = window - now % window
local rate = 0
local finish = 0
if paced then
  finish = tonumber(ARGV[4])
  local v = redis.call('HMGET', KEYS[2], 'published', 'sent', 'failed', 'throttled', 'cancelled',
                       'unregistered', 'expired', 'opted_out', 'suppressed', 'planned_rate')
  rate = limit
  if finish > now then
    local settled = 0
    for i = 2, 9 do
      settled = settled + (tonumber(v[i]) or 0)
    end
    local left = redis.call('SCARD', KEYS[3]) + redis.call('ZCARD', KEYS[4]) +
                 math.max(0, (tonumber(v[1]) or 0) - settled)
    rate = math.max(1, math.ceil(left * 1000 / (finish - now + 1000)))
    if limit > 0 and limit < rate then
      rate = limit
    end
  end
  if tonumber(v[10]) ~= rate then
    redis.call('HSET', KEYS[2], 'planned_rate', rate)
  end
  if rate == 0 then
    return {want, wait, 0} -- no cap and finish_by passed: nothing to count against
  end
  limit = rate
end
local w = math.floor(now / window)
local cur = redis.call('HMGET', KEYS[1], 'w', 'n')
local used = 0
if tonumber(cur[1]) == w then
  used = tonumber(cur[2]) or 0
end
local grant = math.min(want, math.max(0, limit - used))
if grant > 0 then
  if used > 0 then
    redis.call('HINCRBY', KEYS[1], 'n', grant)
  else
    redis.call('HSET', KEYS[1], 'w', w, 'n', grant)
  end
  redis.call('PEXPIRE', KEYS[1], wait + 1000)
end
if grant < want and paced and finish > now and finish - now < wait then
  wait = finish - now
end
return {grant, wait, rate}
