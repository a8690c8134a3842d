-- pull_ack: a user pulled a reminder before its push (hybrid push-pull):
-- the uid moves from subs to pulled, so no chunk will ever hold it.
-- KEYS[1] subs, KEYS[2] pulled, KEYS[3] stats hash, KEYS[4] wait (a
-- local-time or windowed task's recipients not yet due are there),
-- KEYS[5] seq
-- ARGV[1] uid
-- A uid still in subs (or wait) moves and counts.  So does one the set does
-- not hold yet while chunking has not started (seq missing): the caller
-- found it a recipient in MySQL (a series' subscriber who subscribed since
-- the set's fill before the claim; a row whose add to the set failed), and the
-- reconciliation's refill_add skips a pulled uid.  A repeated ack, or one
-- after the uid was chunked, changes nothing.  Returns 1 when moved, else 0.
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 and redis.call('ZREM', KEYS[4], ARGV[1]) == 0 then
    if redis.call('EXISTS', KEYS[5]) == 1 or redis.call('SADD', KEYS[2], ARGV[1]) == 0 then
        return 0
    end
else
    redis.call('SADD', KEYS[2], ARGV[1])
end
redis.call('HINCRBY', KEYS[3], 'pulled', 1)
return 1
