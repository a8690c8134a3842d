-- lease_renew: extend a chunk lease only if we still hold it (worker).
-- KEYS[1] lease; ARGV[1] owner id, ARGV[2] lease ms.  Returns 1 or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
