-- wait_defer: a wave whose window closed before all of it was released
-- waits for the next opening: up to ARGV[4] members scored ARGV[1] (the
-- wave's release instant) get the score ARGV[2], and that wave is recorded
-- with ARGV[3] ("<close ms> <zone>") if new.
-- KEYS[1] wait, KEYS[2] waves (same {t<ID>} tag)
-- Returns the number moved; the caller repeats until 0.  Re-running it is
-- harmless: the members already moved no longer have the old score.
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], ARGV[1], ARGV[1], 'LIMIT', 0, tonumber(ARGV[4]))
for i = 1, #ids do
    redis.call('ZADD', KEYS[1], ARGV[2], ids[i])
end
if #ids > 0 then
    redis.call('HSETNX', KEYS[2], ARGV[2], ARGV[3])
end
return #ids
