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
-- ARGV[3] the caller's owner id (a worker; '' for a dispatcher); then
-- (ARGV[2] for a task's set, ARGV[4] for a chunk) an optional LIMIT.
-- A chunk whose lease someone else holds belongs to that worker, which is
-- pushing it and drops it itself (or, when it never comes back, a later
-- pass once the lease expired); a lease the caller holds goes with the chunk.
-- The count and the DEL are one step, so a recipient acknowledged by a
-- worker is never also counted as cancelled or expired.
-- Returns {n, total}: the number this call dropped (-1, nothing changed,
-- when another holds the chunk), then the stats hash's counter of the
-- outcome after the call.
-- With a LIMIT > 0 (events on: their uids are published as events) at most
-- LIMIT members are dropped, and returned after the two counts: {n, total,
-- uid, ...}; the caller calls again while n == LIMIT.  Each call's pop and
-- count are one step, as the DEL's; a chunk leaves pending (and its lease
-- goes) with the call that empties it.
-- The counter is the one count of the outcome: callers write it to MySQL
-- with GREATEST, never add n, so several dispatchers dropping at once, a
-- worker's drop and a re-run after a lost reply (n = 0 the second time)
-- all leave MySQL at the true total.
local outcome = ARGV[1]
if outcome ~= 'cancelled' and outcome ~= 'expired' then
    return redis.error_reply('drop_set: unknown outcome')
end
local function total()
    return tonumber(redis.call('HGET', KEYS[2], outcome)) or 0
end
local limit = tonumber(#KEYS == 4 and ARGV[4] or ARGV[2]) or 0
local zset = redis.call('TYPE', KEYS[1]).ok == 'zset'
local holder
if #KEYS == 4 then
    holder = redis.call('GET', KEYS[4])
    if holder and holder ~= ARGV[3] then
        return {-1, total()}
    end
end
-- The chunk's bookkeeping once its set is gone.
local function emptied()
    if #KEYS == 4 then
        redis.call('HDEL', KEYS[3], ARGV[2])
        if holder then
            redis.call('DEL', KEYS[4])
        end
    end
end
if limit > 0 then
    local members
    if zset then
        members = redis.call('ZRANGE', KEYS[1], 0, limit - 1)
        if #members > 0 then
            redis.call('ZREM', KEYS[1], unpack(members))
        end
    else
        members = redis.call('SPOP', KEYS[1], limit)
    end
    local n = #members
    if n > 0 then
        redis.call('HINCRBY', KEYS[2], outcome, n)
    end
    if redis.call('EXISTS', KEYS[1]) == 0 then
        emptied()
    end
    local out = {n, total()}
    for i = 1, n do
        out[i + 2] = members[i]
    end
    return out
end
emptied()
local n
if zset then
    n = redis.call('ZCARD', KEYS[1])
else
    n = redis.call('SCARD', KEYS[1])
end
redis.call('DEL', KEYS[1])
if n > 0 then
    redis.call('HINCRBY', KEYS[2], outcome, n)
end
return {n, total()}
