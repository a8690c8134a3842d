-- dead_letter: a recipient that cannot be delivered (worker).
-- KEYS[1] chunk set, KEYS[2] failed hash, KEYS[3] stats hash
-- ARGV[1] uid, ARGV[2] reason
-- Recorded and counted only when the uid was still in the set (a recipient
-- another worker already settled is left alone).  Returns 1 or 0.
local removed = redis.call('SREM', KEYS[1], ARGV[1])
if removed == 1 then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
  redis.call('HINCRBY', KEYS[3], 'failed', 1)
end
return removed
