-- share.lua: take up to WANT units of a channel's per-second budget for one
-- task, the budget shared by the tasks drawing on it in proportion to their
-- weights, and what one leaves unused going to the others (work-conserving).
--
-- KEYS[1]  <prefix>share:{c:<channel>}:tasks   ZSET "<task>:<weight>" -> last ask (ms)
-- KEYS[2]  <prefix>share:{c:<channel>}:0       HASH of an even second, KEYS[3]
--          <prefix>share:{c:<channel>}:1 of an odd one: 's' the second it
--          holds, '_' granted in all, 'u<member>' granted to a task,
--          'r<member>' present when it was refused some
-- ARGV[1]  limit (> 0), ARGV[2] want (>= 0), ARGV[3] member "<task>:<weight>"
-- Returns {grant (0..want), the ms to the second's end (how long a refused
-- caller waits, and how long the units granted are good for)}.
--
-- The clock is Redis's (TIME), so every worker draws from the same second
-- whatever its host's clock says (workers whose clocks differed drew from
-- different one-second budgets, and the channel's rate limit could be
-- exceeded; docs/architecture.md "Clocks").  The second decides which of
-- the two hashes is this second's; the other is the second before only
-- when its 's' says so (else it counts as empty), and this second's is
-- emptied when it still holds an older second.
--
-- A task is active while it asked in the last 2 s; its share is
-- limit * weight / (sum of the active weights).  A grant never exceeds what
-- is left of the second, and never eats into the unspent part of another
-- task's share that the other one will want: all of it when that task was
-- refused something this second or the one before (it wants more than it
-- gets), else at most what it took the second before (it is limited
-- elsewhere: its own rate_limit, its provider, no more recipients).  A
-- task's own unspent share is always open to it.
local limit = tonumber(ARGV[1])
local want = tonumber(ARGV[2])
local me = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local sec = math.floor(now / 1000)
local cur, prev = KEYS[2 + sec % 2], KEYS[3 - sec % 2]
if tonumber(redis.call('HGET', cur, 's')) ~= sec then
  redis.call('DEL', cur)
  redis.call('HSET', cur, 's', sec)
end
local prev_ok = tonumber(redis.call('HGET', prev, 's')) == sec - 1

redis.call('ZADD', KEYS[1], now, me)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - 2000)
redis.call('PEXPIRE', KEYS[1], 10000)
local weights, sum = {}, 0
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local w = tonumber(string.match(m, ':(%d+)$')) or 1
  weights[m] = w
  sum = sum + w
end

local function num(key, field)
  if key == prev and not prev_ok then
    return 0
  end
  return tonumber(redis.call('HGET', key, field) or '0')
end

local function refused(key, m)
  if key == prev and not prev_ok then
    return false
  end
  return redis.call('HEXISTS', key, 'r' .. m) == 1
end

local free = limit - num(cur, '_')
local grant = 0
if free > 0 then
  local reserve = 0
  for m, w in pairs(weights) do
    if m ~= me then
      local share = limit * w / sum
      local wants = share
      if not refused(cur, m) and not refused(prev, m) then
        wants = math.min(share, num(prev, 'u' .. m))
      end
      reserve = reserve + math.max(0, wants - num(cur, 'u' .. m))
    end
  end
  local mine = limit * weights[me] / sum - num(cur, 'u' .. me)
  local room = math.max(free - reserve, math.min(free, mine))
  grant = math.floor(math.min(want, math.max(0, room)))
end
if grant > 0 then
  redis.call('HINCRBY', cur, 'u' .. me, grant)
  redis.call('HINCRBY', cur, '_', grant)
end
if grant < want then
  redis.call('HSET', cur, 'r' .. me, 1)
end
redis.call('PEXPIRE', cur, 3000)
return {grant, 1000 - now % 1000}
