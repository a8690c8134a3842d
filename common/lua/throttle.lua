-- throttle.lua: one recipient's sliding-window throttle, decided atomically.
--
-- KEYS[1]  <prefix>thr:<scope>:<uid>[:<value>]  a STREAM, one entry per pass
-- ARGV[1]  limit (>= 1), ARGV[2] window in ms (>= 1), ARGV[3] tag (task id)
-- Returns {verdict, now_ms, count}:
--   verdict 1  under the limit: an entry stamped now_ms was added and the key
--              now expires one window later
--           2  this tag already has an entry in the window: pass, add nothing
--              (a redelivered chunk re-checks recipients it already counted;
--              they must not be counted twice nor throttled by themselves)
--           0  throttled: nothing is written
--   now_ms     the server time the decision was made at
--   count      entries in the window after the call
--
-- An entry stamped t counts while now_ms is in [t, t + window): only ids
-- >= now_ms - window + 1 are read, and the add trims the older ones in the
-- same XADD (MINID), so the key's expiry, set on every add, falls exactly
-- when its newest entry leaves the window.  A call that adds nothing leaves
-- old entries for the next add or the expiry: they are never read, and a
-- separate XTRIM per call cost more Redis time than it saved (bench/run
-- throttle, docs/performance.md).  Time is the
-- server's (TIME), so the workers' clocks do not matter.  The entry id
-- carries the time ("now_ms-*"); if the server clock stepped back behind the
-- newest id, XADD refuses that id and "*" takes the newest id's time instead
-- (the entry then counts a little longer, never shorter).
--
-- There is no mode argument: shadow mode must measure what enforce would do,
-- so the script behaves the same and the caller decides whether a throttled
-- recipient is pushed anyway.
local key = KEYS[1]
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local tag = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local oldest = string.format('%.0f', now - window + 1)
local entries = redis.call('XRANGE', key, oldest, '+')
for _, e in ipairs(entries) do
  if e[2][2] == tag then
    return {2, now, #entries}
  end
end
if #entries >= limit then
  return {0, now, #entries}
end
local added = redis.pcall('XADD', key, 'MINID', oldest, string.format('%.0f', now) .. '-*',
                          't', tag)
if type(added) == 'table' and added.err then
  redis.call('XADD', key, 'MINID', oldest, '*', 't', tag)
end
redis.call('PEXPIRE', key, ARGV[2])
return {1, now, #entries + 1}
