-- handback: a worker gives a chunk it cannot finish back to the dispatcher,
-- to be published again at once (issue 34) rather than after
-- redelivery_timeout_s: a Redis failover outlasted worker.stall_max_ms, or
-- the worker lacks the task's channel.  Idempotent.
-- KEYS[1] pending hash, KEYS[2] lease
-- ARGV[1] seq, ARGV[2] owner id
-- The lease is released if the caller holds it, and the chunk's publish
-- time becomes 0, so any sweep finds it stale (sweep_claim.lua still waits
-- for a lease another worker holds).  The caller then adds the chunk to
-- the hand-back set (another slot on a cluster), which the dispatchers
-- read every second.  Returns 1 when the chunk is pending, 0 when it is
-- done already or its task's keys are gone.
if redis.call('GET', KEYS[2]) == ARGV[2] then
  redis.call('DEL', KEYS[2])
end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], ARGV[1], 0)
return 1
