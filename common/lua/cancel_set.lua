-- cancel_set: drops recipients of a cancelled task, counting them as
-- cancelled — the task's subs (a dispatcher's cancel transition), or one
-- chunk (a dispatcher's later passes over the task's chunks, and the worker
-- that held the chunk, after its in-flight requests finished and their acks
-- were written, or before it took the lease when the task was cancelled
-- already).
-- KEYS[1] the set (subs, chunk:<seq>, or the wait ZSET of a local-time or
-- windowed task), KEYS[2] stats hash,
-- and for a chunk also KEYS[3] pending, KEYS[4] lease:<seq>, ARGV[1] seq,
-- ARGV[2] the caller's owner id (a worker; absent for a dispatcher).
-- A chunk whose lease someone else holds belongs to that worker, which is
-- pushing it and cancels it itself (or, when it never comes back, a later
-- pass once the lease expired); a lease the caller holds goes with the chunk.
-- The count and the DEL are one step, so a recipient acknowledged by a
-- worker is never also counted as cancelled.
-- Returns {n, cancelled}: the number this call cancelled (-1, nothing
-- changed, when another holds the chunk), then the stats hash's cancelled
-- counter after the call.  The counter is the one count of cancelled
-- recipients: callers write it to MySQL with GREATEST, never add n, so
-- several dispatchers cancelling at once, a worker's cancel and a re-run
-- after a lost reply (n = 0 the second time) all leave MySQL at the true
-- total.
local function total()
    return tonumber(redis.call('HGET', KEYS[2], 'cancelled')) or 0
end
local holder = false
if #KEYS == 4 then
    holder = redis.call('GET', KEYS[4])
    if holder and holder ~= ARGV[2] then
        return {-1, total()}
    end
    redis.call('HDEL', KEYS[3], ARGV[1])
    if holder then
        redis.call('DEL', KEYS[4])
    end
end
local n
if redis.call('TYPE', KEYS[1]).ok == 'zset' then
    n = redis.call('ZCARD', KEYS[1])
else
    n = redis.call('SCARD', KEYS[1])
end
redis.call('DEL', KEYS[1])
if n > 0 then
    redis.call('HINCRBY', KEYS[2], 'cancelled', n)
end
return {n, total()}
