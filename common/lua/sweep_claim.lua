-- sweep_claim: lets exactly one sweeper republish a stale pending chunk.
-- The chunk's publish time must still be the one the sweeper read and no
-- worker may hold its lease; then the publish time becomes now.
-- KEYS[1] pending, KEYS[2] lease:<seq>
-- ARGV[1] seq, ARGV[2] publish time the sweeper saw, ARGV[3] now in ms
-- Returns 1 when the caller should republish, else 0.
if redis.call('HGET', KEYS[1], ARGV[1]) ~= ARGV[2] then
    return 0
end
if redis.call('EXISTS', KEYS[2]) == 1 then
    return 0
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 1
