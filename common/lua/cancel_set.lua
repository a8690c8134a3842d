-- cancel_set: drops a task's remaining recipients on cancel, counting them
-- as cancelled (dispatcher's cancel transition).
-- KEYS[1] the set (subs or chunk:<seq>), KEYS[2] stats hash,
-- and for a chunk also KEYS[3] pending, KEYS[4] lease:<seq> with ARGV[1] seq.
-- A chunk whose lease is live belongs to a worker, which cancels it itself.
-- Returns the number cancelled, or -1 when a worker holds the chunk.
if #KEYS == 4 then
    if redis.call('EXISTS', KEYS[4]) == 1 then
        return -1
    end
    redis.call('HDEL', KEYS[3], ARGV[1])
end
local n = redis.call('SCARD', KEYS[1])
redis.call('DEL', KEYS[1])
if n > 0 then
    redis.call('HINCRBY', KEYS[2], 'cancelled', n)
end
return n
