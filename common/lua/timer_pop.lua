-- timer_pop: pops the due entries of the timer ZSET atomically, so that of
-- several dispatchers polling at once exactly one gets each task id.
-- KEYS[1] timer ZSET (task id -> due ms)
-- ARGV[1] now in ms, ARGV[2] at most this many entries
-- Returns a flat list: id1, due1, id2, due2, ..., then the due time of the
-- earliest entry left (when there is one), so the caller can sleep until
-- then: an odd length means that last element is there.
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
for i = 1, #due, 2 do
    redis.call('ZREM', KEYS[1], due[i])
end
local next = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #next == 2 then
    due[#due + 1] = next[2]
end
return due
