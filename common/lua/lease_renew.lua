-- lease_renew: extend a lease only if we still hold it (a worker's chunk
-- lease; the prepare and address-sync locks).
-- KEYS[1] lease, KEYS[2] (a chunk's only) its pending hash
-- ARGV[1] owner id, ARGV[2] lease ms, ARGV[3] (with KEYS[2]) the chunk's seq
-- Returns 1 or 0.
-- A chunk lease that is gone while its chunk is still pending is taken
-- again (issue 34): it expired while Redis was down or restarting (its
-- expiry is wall-clock time, so a Redis back from its AOF drops one that
-- ran out meanwhile), and the worker that held the chunk through the
-- stall is still its rightful holder; another worker that took it since
-- makes this answer 0, and so does a chunk gone (done, or its task's keys
-- deleted).  A lock's holder passes no KEYS[2]: a lock gone may have been
-- another's since.
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not holder and KEYS[2] and redis.call('HEXISTS', KEYS[2], ARGV[3]) == 1 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
