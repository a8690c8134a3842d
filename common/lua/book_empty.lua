-- book_empty: records that a sync found the profile book empty in MySQL,
-- unless a rewrite of a profile hash began since the sync read its count
-- (then a profile may be on its way, and workers keep reading them).
-- KEYS[1] herald:user_book
-- ARGV[1] the book's "writes" the sync read before asking MySQL ('0': none)
-- Returns 1 recorded, 0 not.
if (redis.call('HGET', KEYS[1], 'writes') or '0') ~= ARGV[1] then
    return 0
end
redis.call('HSET', KEYS[1], 'empty', ARGV[1])
return 1
