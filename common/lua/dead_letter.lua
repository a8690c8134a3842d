-- dead_letter: recipients that cannot be delivered (worker, per ack batch,
-- in the same pipeline as ack.lua; and the invalid members of a chunk).
-- KEYS[1] chunk set, KEYS[2] failed hash, KEYS[3] stats hash
-- ARGV[1], ARGV[2] uid and reason, ARGV[3], ARGV[4] the next, ...
-- Each is recorded and counted only when the uid was still in the set (a
-- recipient another worker already settled is left alone).  Returns
-- {removed, sent, failed, throttled, retried, unregistered, opted_out,
-- suppressed}: how many were recorded, then the stats hash's counters after this call, as ack.lua.
local removed = 0
for i = 1, #ARGV - 1, 2 do
  if redis.call('SREM', KEYS[1], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    removed = removed + 1
  end
end
if removed > 0 then
  redis.call('HINCRBY', KEYS[3], 'failed', removed)
end
local s = redis.call('HMGET', KEYS[3], 'sent', 'failed', 'throttled', 'retried',
                     'unregistered', 'opted_out', 'suppressed')
return {removed, tonumber(s[1]) or 0, tonumber(s[2]) or 0, tonumber(s[3]) or 0,
        tonumber(s[4]) or 0, tonumber(s[5]) or 0, tonumber(s[6]) or 0, tonumber(s[7]) or 0}
