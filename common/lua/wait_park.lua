-- wait_park: the owner's plan of a local-time or windowed task moves
-- recipients from subs into the wait set, each scored with its release
-- instant, and records each wave (release instant -> "<close ms> <zone>")
-- the first time it is seen.  A worker puts recipients off the same way,
-- from its chunk's set: those in their own quiet hours wait for the hours'
-- end (docs/recipients.md), and the owner releases them like any wave.  A
-- recipient is always in exactly one of the sets: it is added to wait only
-- if this call took it out of KEYS[1], so a re-run after a lost reply, or a
-- uid a pull or another worker took meanwhile, changes nothing.
-- KEYS[1] subs or a chunk set, KEYS[2] wait, KEYS[3] waves (same tag)
-- ARGV triples: release ms, uid, wave value
-- Returns the number parked.
local n = 0
for i = 1, #ARGV, 3 do
    if redis.call('SREM', KEYS[1], ARGV[i + 1]) == 1 then
        redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i + 1])
        redis.call('HSETNX', KEYS[3], ARGV[i], ARGV[i + 2])
        n = n + 1
    end
end
return n
