-- chunk_done: close a chunk whose set is empty (worker; idempotent).
-- KEYS[1] chunk set, KEYS[2] lease, KEYS[3] pending hash, KEYS[4] stats
-- hash, KEYS[5] subs set, KEYS[6] wait set
-- ARGV[1] seq, ARGV[2] owner id
-- Returns {removed, pending left, not chunked left, sent, failed, throttled,
-- retried, unregistered, opted_out, suppressed}; removed is 1 when this call
-- closed the chunk, 0 when it was closed before, -1 when the set is not empty
-- (then only the lease is dropped, if ARGV[2] holds it: members appeared
-- after the read, or an ack failed, and the sweeper redelivers the chunk, so
-- its next holder need not wait out the lease); not chunked left counts subs
-- and the wait set (recipients a worker put off to their quiet hours' end
-- wait there, and the task is not finished while they do); the last seven
-- are the stats hash's counters (as ack.lua), so a redelivered chunk's close
-- reports what a killed worker could not.
local s = redis.call('HMGET', KEYS[4], 'sent', 'failed', 'throttled', 'retried',
                     'unregistered', 'opted_out', 'suppressed')
local counters = {tonumber(s[1]) or 0, tonumber(s[2]) or 0, tonumber(s[3]) or 0,
                  tonumber(s[4]) or 0, tonumber(s[5]) or 0, tonumber(s[6]) or 0,
                  tonumber(s[7]) or 0}
local left = redis.call('SCARD', KEYS[5]) + redis.call('ZCARD', KEYS[6])
local held = redis.call('GET', KEYS[2]) == ARGV[2]
if redis.call('SCARD', KEYS[1]) ~= 0 then
  if held then
    redis.call('DEL', KEYS[2])
  end
  return {-1, redis.call('HLEN', KEYS[3]), left, unpack(counters)}
end
redis.call('DEL', KEYS[1])
if held then
  redis.call('DEL', KEYS[2])
end
local removed = redis.call('HDEL', KEYS[3], ARGV[1])
if removed == 1 then
  redis.call('HINCRBY', KEYS[4], 'chunks_done', 1)
end
return {removed, redis.call('HLEN', KEYS[3]), left, unpack(counters)}
