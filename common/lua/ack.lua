-- ack: acknowledge settled recipients of a chunk (worker, per ack batch).
-- KEYS[1] chunk set, KEYS[2] stats hash
-- ARGV[1] retries spent since the last batch, ARGV[2] the stats field the
-- removed uids count under ('sent'; 'throttled' for recipients the throttle
-- blocked; 'unregistered' for those with no live address; 'opted_out' and
-- 'suppressed' for those consent held back), ARGV[3..] uids
-- Only uids still in the set count, so a redelivered chunk never counts a
-- recipient twice.  Returns {removed, sent, failed, throttled, retried,
-- unregistered, opted_out, suppressed}: how many were removed, then the
-- stats hash's counters after this call (absolute values, which the worker's reporter writes to MySQL
-- with GREATEST, so a lost or late report never leaves push_task low or
-- counts twice).
local removed = 0
-- unpack() is limited by the Lua C stack (8000 slots): remove in slices.
for i = 3, #ARGV, 1000 do
  removed = removed + redis.call('SREM', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
if removed > 0 then
  redis.call('HINCRBY', KEYS[2], ARGV[2], removed)
end
local retried = tonumber(ARGV[1])
if retried > 0 then
  redis.call('HINCRBY', KEYS[2], 'retried', retried)
end
local s = redis.call('HMGET', KEYS[2], 'sent', 'failed', 'throttled', 'retried',
                     'unregistered', 'opted_out', 'suppressed')
return {removed, tonumber(s[1]) or 0, tonumber(s[2]) or 0, tonumber(s[3]) or 0,
        tonumber(s[4]) or 0, tonumber(s[5]) or 0, tonumber(s[6]) or 0, tonumber(s[7]) or 0}
