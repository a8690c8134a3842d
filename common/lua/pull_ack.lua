-- pull_ack: a user pulled a reminder before its push (hybrid push-pull):
-- the uid moves from subs to pulled, so no chunk will ever hold it.
-- KEYS[1] subs, KEYS[2] pulled, KEYS[3] stats hash, KEYS[4] wait (a
-- local-time or windowed task's recipients not yet due are there)
-- ARGV[1] uid
-- Only a uid still in subs moves and counts (a repeated ack, or one after
-- the uid was chunked, changes nothing).  Returns 1 when moved, else 0.
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 and redis.call('ZREM', KEYS[4], ARGV[1]) == 0 then
    return 0
end
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('HINCRBY', KEYS[3], 'pulled', 1)
return 1
