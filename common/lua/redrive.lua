-- redrive: one slice of a task's dead-lettered recipients goes back into a
-- new chunk (heraldctl redrive, which picks the uids with HSCAN and sends
-- at most chunk_size of them); the sweeper publishes it since its publish
-- time is old.
-- KEYS[1] failed hash, KEYS[2] chunk:<seq> (new), KEYS[3] pending,
-- KEYS[4] stats hash, KEYS[5] redrive:<seq> (this call's recorded result)
-- ARGV[1] seq, ARGV[2] publish time to record (ms), ARGV[3..] uids
-- Only uids still in the hash move (a uid HSCAN returned twice, or one
-- another redrive took, moves once).  Returns the number moved (0: nothing
-- written).
-- Safe to run twice for one seq (hr_redis repeats a call whose reply was
-- lost): the first run records its result in KEYS[5] and a re-run answers
-- that instead of moving again (it would find the uids gone and answer 0,
-- and the caller would report "no dead letters" and leave the task done
-- with a chunk nobody publishes).  The record outlives any retry by far
-- and then expires.
local done = redis.call('GET', KEYS[5])
if done then
    return tonumber(done)
end
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
redis.call('SET', KEYS[5], moved, 'PX', 3600000)
return moved
