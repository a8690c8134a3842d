-- drop_set: drops the recipients left in a set, counting them under one
-- outcome: 'cancelled' (the task was cancelled) or 'expired' (the task's
-- expire_at passed before they were pushed).  The set is the task's subs
-- (a dispatcher's cancel transition, or its chunker at expire_at), or one
-- chunk (a dispatcher's later passes over the task's chunks, and the worker
-- that held the chunk, after its in-flight requests finished and their acks
-- were written, or before it took the lease when the task was cancelled or
-- expired already).
-- KEYS[1] the set (subs, chunk:<seq>, or the wait ZSET of a local-time or
-- windowed task), KEYS[2] stats hash,
-- and for a chunk also KEYS[3] pending, KEYS[4] lease:<seq>;
-- ARGV[1] the outcome (the stats hash field), and for a chunk ARGV[2] seq,
-- ARGV[3] the caller's owner id (a worker; absent for a dispatcher).
-- A chunk whose lease someone else holds belongs to that worker, which is
-- pushing it and drops it itself (or, when it never comes back, a later
-- pass once the lease expired); a lease the caller holds goes with the chunk.
-- The count and the DEL are one step, so a recipient acknowledged by a
-- worker is never also counted as cancelled or expired.
-- Returns {n, total}: the number this call dropped (-1, nothing changed,
-- when another holds the chunk), then the stats hash's counter of the
-- outcome after the call.  The counter is the one count of the outcome:
-- callers write it to MySQL with GREATEST, never add n, so several
-- dispatchers dropping at once, a worker's drop and a re-run after a lost
-- reply (n = 0 the second time) all leave MySQL at the true total.
local outcome = ARGV[1]
if outcome ~= 'cancelled' and outcome ~= 'expired' then
    return redis.error_reply('drop_set: unknown outcome')
end
local function total()
    return tonumber(redis.call('HGET', KEYS[2], outcome)) or 0
end
if #KEYS == 4 then
    local holder = redis.call('GET', KEYS[4])
    if holder and holder ~= ARGV[3] then
        return {-1, total()}
    end
    redis.call('HDEL', KEYS[3], ARGV[2])
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
    redis.call('HINCRBY', KEYS[2], outcome, n)
end
return {n, total()}
