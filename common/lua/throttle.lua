-- throttle.lua: one recipient's sliding-window throttle, decided atomically.
--
-- KEYS[1]  <prefix>thr:<scope>:<uid>[:<value>]  a SORTED SET: one member per
--          task that passed (the tag), scored with the ms it passed at
-- ARGV[1]  limit (>= 1), ARGV[2] window in ms (>= 1), ARGV[3] tag (task id)
-- Returns {verdict, now_ms, count}:
--   verdict 1  under the limit: the tag was added stamped now_ms and the key
--              now expires one window later
--           2  this tag already passed within the window: pass, add nothing
--              (a redelivered chunk re-checks recipients it already counted;
--              they must not be counted twice nor throttled by themselves)
--           0  throttled: nothing is written
--   now_ms     the server time the decision was made at
--   count      passes in the window after the call
--
-- A pass stamped t counts while now_ms is in [t, t + window): only scores
-- >= now_ms - window + 1 are counted.  A tag passes at most once per window
-- (verdict 2 otherwise), so one member per tag holds every pass that
-- counts; a tag whose pass left the window passes anew by moving its score
-- (ZADD), which is what a new entry and the trim of the old one did in the
-- stream this replaced.  An add trims what left the window (only when the
-- set holds more than the window's passes and the new one), and sets the
-- key's expiry, so it falls exactly when the newest pass leaves the window.
-- A call that adds nothing writes nothing (no AOF traffic for a throttled
-- or re-checked recipient); the members it leaves are never counted.  Time
-- is the server's (TIME), so the workers' clocks do not matter; a server
-- clock stepped back stamps the new pass with its own time and leaves the
-- later-stamped ones counting until it passes them by a window (longer,
-- never shorter).
--
-- A window written by a worker from before issue 19 is a STREAM (entry id
-- "<ms>-<seq>", field t = the tag): the first call on it rewrites it as the
-- sorted set, the passes still in the window and the expiry kept.
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
local oldest = now - window + 1

local count = redis.pcall('ZCOUNT', key, oldest, '+inf')
if type(count) == 'table' then
  local ttl = redis.call('PTTL', key)
  local entries = redis.call('XRANGE', key, string.format('%.0f', oldest), '+')
  redis.call('DEL', key)
  for _, e in ipairs(entries) do
    redis.call('ZADD', key, 'GT', tonumber(string.match(e[1], '^%d+')), e[2][2])
  end
  if #entries > 0 and ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  end
  count = redis.call('ZCOUNT', key, oldest, '+inf')
end
if count > 0 then
  local mine = redis.call('ZSCORE', key, tag)
  if mine and tonumber(mine) >= oldest then
    return {2, now, count}
  end
  if count >= limit then
    return {0, now, count}
  end
end
redis.call('ZADD', key, now, tag)
if redis.call('ZCARD', key) > count + 1 then
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. string.format('%.0f', oldest))
end
redis.call('PEXPIRE', key, window)
return {1, now, count + 1}
