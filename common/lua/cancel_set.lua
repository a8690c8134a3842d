-- cancel_set: drops a task's remaining recipients on cancel, counting them
-- as cancelled (dispatcher's cancel transition and its later passes over a
-- cancelled task's chunks).
-- KEYS[1] the set (subs or chunk:<seq>), KEYS[2] stats hash,
-- and for a chunk also KEYS[3] pending, KEYS[4] lease:<seq> with ARGV[1] seq.
-- A chunk whose lease is live belongs to a worker, which cancels it itself
-- (or, when it never comes back, a later pass once the lease expired).
-- Returns {n, cancelled}: the number this call cancelled (-1 when a worker
-- holds the chunk), then the stats hash's cancelled counter after the call.
-- The counter is the one count of cancelled recipients: callers write it to
-- MySQL with GREATEST, never add n, so several dispatchers cancelling at
-- once, a worker's chunk_cancel and a re-run after a lost reply (n = 0 the
-- second time) all leave MySQL at the true total.
local function total()
    return tonumber(redis.call('HGET', KEYS[2], 'cancelled')) or 0
end
if #KEYS == 4 then
    if redis.call('EXISTS', KEYS[4]) == 1 then
        return {-1, total()}
    end
    redis.call('HDEL', KEYS[3], ARGV[1])
end
local n = redis.call('SCARD', KEYS[1])
redis.call('DEL', KEYS[1])
if n > 0 then
    redis.call('HINCRBY', KEYS[2], 'cancelled', n)
end
return {n, total()}
