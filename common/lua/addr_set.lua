-- addr_set: replaces one uid's address set with the rows MySQL holds now
-- (hr_addr's rewrite after a write, and the sync of changed uids).  One
-- script so that a worker never reads the set between the DEL and the SADD.
-- KEYS[1] herald:addr:<uid>
-- ARGV members "<platform> <app> <address>"; none = the uid has no address
-- Returns the number of members stored.
redis.call('DEL', KEYS[1])
for i = 1, #ARGV, 1000 do
    redis.call('SADD', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return #ARGV
