-- chunk_move: moves up to ARGV[1] recipients of a task from its subscriber
-- set into a new chunk set and records the chunk as pending, in one atomic
-- step: a recipient is always in exactly one of subs or one chunk.
-- KEYS[1] subs, KEYS[2] chunk:<seq>, KEYS[3] pending (same {t<ID>} tag)
-- ARGV[1] how many, ARGV[2] seq, ARGV[3] now in ms
-- Returns the number moved; 0 = subs was empty (nothing is written).
-- Safe to run twice for one seq (hr_redis repeats a call whose reply was
-- lost): a seq already pending was moved by the first run, which the caller
-- never heard of; the re-run moves nothing more and answers that chunk's
-- size, so the published count is the set's.  (Nothing can have shrunk the
-- set in between: it is published only after this reply.)
if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 1 then
    return redis.call('SCARD', KEYS[2])
end
local ids = redis.call('SPOP', KEYS[1], tonumber(ARGV[1]))
if #ids == 0 then
    return 0
end
-- unpack() is limited by the Lua C stack (8000 slots): add in slices.
for i = 1, #ids, 4000 do
    redis.call('SADD', KEYS[2], unpack(ids, i, math.min(i + 3999, #ids)))
end
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
return #ids
