-- lease_release: drop a chunk lease only if we hold it (worker abandons a
-- chunk on revoke or shutdown).  KEYS[1] lease; ARGV[1] owner id.
-- Returns 1 or 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
