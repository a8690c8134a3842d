-- wait_release: the chunker releases up to ARGV[2] recipients whose release
-- instant has come (score <= ARGV[1]) from the wait set into subs, where
-- chunk_move takes them, and counts them per wave (released:<score>).
-- KEYS[1] wait, KEYS[2] subs, KEYS[3] waves (same {t<ID>} tag)
-- ARGV[1] now in ms, ARGV[2] how many at most
-- Returns {released, the earliest release instant still waiting or -1,
-- members still waiting}.  A re-run after a lost reply releases the next
-- due ones, which are due too: nothing is lost or counted twice.
local items = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0,
    tonumber(ARGV[2]))
local per = {}
for i = 1, #items, 2 do
    redis.call('ZREM', KEYS[1], items[i])
    redis.call('SADD', KEYS[2], items[i])
    per[items[i + 1]] = (per[items[i + 1]] or 0) + 1
end
for score, n in pairs(per) do
    redis.call('HINCRBY', KEYS[3], 'released:' .. score, n)
end
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {#items / 2, first[2] and tonumber(first[2]) or -1, redis.call('ZCARD', KEYS[1])}
