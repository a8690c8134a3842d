-- refill_add: the scanner's refill of a subscriber set from MySQL.  Adds the
-- given uids to subs except those who already pulled the reminder, and only
-- while chunking has not started (the seq key does not exist): after that a
-- refill would bring back recipients already moved into chunks.
-- KEYS[1] subs, KEYS[2] pulled, KEYS[3] seq
-- ARGV uids
-- Returns the number added, or -1 when chunking has started.
if redis.call('EXISTS', KEYS[3]) == 1 then
    return -1
end
local added = 0
for i = 1, #ARGV do
    if redis.call('SISMEMBER', KEYS[2], ARGV[i]) == 0 then
        added = added + redis.call('SADD', KEYS[1], ARGV[i])
    end
end
return added
