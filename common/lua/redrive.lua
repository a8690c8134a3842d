-- redrive: one slice of a task's dead-lettered recipients goes back into a
-- new chunk (heraldctl redrive, which picks the uids with HSCAN and sends
-- at most chunk_size of them); the sweeper publishes it since its publish
-- time is old.
-- KEYS[1] failed hash, KEYS[2] chunk:<seq> (new), KEYS[3] pending,
-- KEYS[4] stats hash
-- ARGV[1] seq, ARGV[2] publish time to record (ms), ARGV[3..] uids
-- Only uids still in the hash move (a uid HSCAN returned twice, or one
-- another redrive took, moves once).  Returns the number moved (0: nothing
-- written).
-- The moved recipients were published once already: the new chunk's first
-- publish adds its size to stats.published (and push_task.total) again, so
-- they are taken off here first and each recipient counts once.
local moved = 0
for i = 3, #ARGV do
    if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
        redis.call('SADD', KEYS[2], ARGV[i])
        moved = moved + 1
    end
end
if moved == 0 then
    return 0
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
redis.call('HINCRBY', KEYS[4], 'failed', -moved)
redis.call('HINCRBY', KEYS[4], 'published', -moved)
return moved
