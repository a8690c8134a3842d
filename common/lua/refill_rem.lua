-- refill_rem: the series delta's removal from a subscriber set before
-- chunking (common/hr_subs.c): takes out the given uids, who left the
-- series since the set was filled, only while chunking has not started (the
-- seq key does not exist): after that the set is no longer the task's
-- recipients to come but what is left of them.  The keys are refill_add's,
-- so one caller serves both; pulled is not touched (a uid who pulled and
-- then left stays counted pulled).
-- KEYS[1] subs, KEYS[2] pulled, KEYS[3] seq
-- ARGV uids
-- Returns the number removed, or -1 when chunking has started.
if redis.call('EXISTS', KEYS[3]) == 1 then
    return -1
end
-- One SREM a uid: unpack() of a page of 10,000 would pass Lua's C stack.
local removed = 0
for i = 1, #ARGV do
    removed = removed + redis.call('SREM', KEYS[1], ARGV[i])
end
return removed
