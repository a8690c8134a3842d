-- chunk_cancel: drop the recipients left in a chunk of a cancelled task
-- (worker, after its in-flight requests finished and their acks were written,
-- or before it took the lease when the task was cancelled already).
-- KEYS[1] chunk set, KEYS[2] stats hash, KEYS[3] pending hash, KEYS[4] lease
-- ARGV[1] seq, ARGV[2] owner id
-- The count and the DEL are one step, so a recipient acknowledged by
-- another worker is never also counted as cancelled.  Returns {n,
-- cancelled}: the number this call cancelled, or -1 (nothing changed) when
-- another worker holds a live lease (that holder is pushing the chunk and
-- cancels it itself); then the stats hash's cancelled counter, which the
-- worker reports to MySQL with GREATEST (as cancel_set.lua), so a re-run
-- after a lost reply (n = 0) still reports the true total.
local function total()
  return tonumber(redis.call('HGET', KEYS[2], 'cancelled')) or 0
end
local holder = redis.call('GET', KEYS[4])
if holder and holder ~= ARGV[2] then
  return {-1, total()}
end
local n = redis.call('SCARD', KEYS[1])
redis.call('DEL', KEYS[1])
if n > 0 then
  redis.call('HINCRBY', KEYS[2], 'cancelled', n)
end
redis.call('HDEL', KEYS[3], ARGV[1])
if holder then
  redis.call('DEL', KEYS[4])
end
return {n, total()}
