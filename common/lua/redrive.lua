-- redrive: dead-lettered recipients of a task go back into a new chunk
-- (heraldctl redrive); the sweeper publishes it since its publish time is
-- old.
-- KEYS[1] failed hash, KEYS[2] chunk:<seq> (new), KEYS[3] pending,
-- KEYS[4] stats hash
-- ARGV[1] seq, ARGV[2] publish time to record (ms)
-- Returns the number of recipients moved (0: nothing written).
local uids = redis.call('HKEYS', KEYS[1])
if #uids == 0 then
    return 0
end
for i = 1, #uids, 4000 do
    redis.call('SADD', KEYS[2], unpack(uids, i, math.min(i + 3999, #uids)))
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[4], 'failed', -#uids)
return #uids
