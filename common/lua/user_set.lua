-- user_set: replaces one uid's profile hash with the fields MySQL holds now
-- (hr_user's rewrite after a write, and the sync of changed uids).  One
-- script so that a worker never reads the hash between the DEL and the
-- HSET.
-- KEYS[1] herald:user:<uid>
-- ARGV field, value, field, value, ...; none = the uid has no profile
-- Returns the number of fields stored.
redis.call('DEL', KEYS[1])
for i = 1, #ARGV, 1000 do
    redis.call('HSET', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
return #ARGV / 2
