-- throttle.lua: the sliding-window throttle of one or more recipients under
-- one rule, each decided atomically, in KEYS order.
--
-- KEYS[i]  <prefix>thr:<scope>:<uid>[:<value>]  a window: a STRING
--          "<tag>:<ms>" while it holds one pass, else a SORTED SET with one
--          member per task that passed (the tag), scored with the ms it
--          passed at
-- ARGV[1]  limit (>= 1), ARGV[2] window in ms (>= 1), ARGV[3] tag (task id)
-- Returns {now_ms, code_1, code_2, ...}, code_i = verdict + 4 * count of
-- KEYS[i] (one integer per key: the reply of a call of 100 keys is half as
-- long, which Redis builds and the worker parses for every recipient):
--   now_ms     the server time the decisions were made at
--   verdict 1  under the limit: the tag was added stamped now_ms and the key
--              now expires one window later
--           2  this tag already passed within the window: pass, add nothing
--              (a redelivered chunk re-checks recipients it already counted;
--              they must not be counted twice nor throttled by themselves)
--           0  throttled: nothing is written
--   count      passes in the window after that key's step
--
-- Several keys per call is what makes the throttle cheap: one EVALSHA, one
-- TIME and one reply for a batch instead of per recipient (half the Redis
-- CPU per recipient, docs/performance.md).  A key named twice is decided
-- twice, the second time seeing the first's pass (verdict 2), exactly as
-- two calls in a row.  On a Redis Cluster every key of a call must share a
-- slot; hr_throttle.c then sends one key per call.
--
-- Most windows only ever hold one pass (a recipient reached once in a
-- window), so a window starts as a STRING written with its expiry by one
-- SET NX ... GET, which answers what the key held when it was not new: one
-- command for a fresh recipient (a GET then a SET before; the sorted set
-- took ZCOUNT, ZADD, ZCARD and PEXPIRE; docs/throttle.md "Cost").  Another
-- task's pass inside the window turns it into the sorted set of both; a
-- string whose pass left the window (a longer window's expiry) is replaced,
-- as the sorted set would trim it.  A string answers exactly as the sorted
-- set of its one member would.
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
-- sorted set, the passes still in the window and the expiry kept.  (SET
-- ... GET answers WRONGTYPE on a sorted set or a stream, ZCOUNT on a
-- stream.)
--
-- There is no mode argument: shadow mode must measure what enforce would do,
-- so the script behaves the same and the caller decides whether a throttled
-- recipient is pushed anyway.
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local tag = ARGV[3]
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local oldest = now - window + 1
local oldest_s = string.format('%.0f', oldest)
local now_s = string.format('%.0f', now)
-- Made once per call, not per key: the pass a fresh window gets, and the
-- window as the text Redis would otherwise format from a number each time.
local pass = tag .. ':' .. now_s
local window_s = ARGV[2]

-- A window of the STREAM layout, rewritten as the sorted set; its count.
local function from_stream(key)
  local ttl = redis.call('PTTL', key)
  local entries = redis.call('XRANGE', key, oldest_s, '+')
  redis.call('DEL', key)
  for _, e in ipairs(entries) do
    redis.call('ZADD', key, 'GT', tonumber(string.match(e[1], '^%d+')), e[2][2])
  end
  if #entries > 0 and ttl > 0 then
    redis.call('PEXPIRE', key, ttl)
  end
  return redis.call('ZCOUNT', key, oldest, '+inf')
end

-- One key's step: its verdict and count.
local function step(key)
  -- Written only when the key did not exist (false); else the string it
  -- holds, or WRONGTYPE for a sorted set or a stream (nothing written).
  local one = redis.pcall('SET', key, pass, 'NX', 'PX', window_s, 'GET')
  if one == false then
    return 1, 1
  end
  if type(one) == 'string' then
    -- One match, lazy: '^(.*):' backtracked from the string's end and a
    -- second match found the ms again, a fifth of a re-check's Redis
    -- instructions (docs/throttle.md "Cost").  The tag ends at the last
    -- ':' either way, since the ms after it are digits only.
    local otag, ms = string.match(one, '^(.-):(%d+)$')
    if (tonumber(ms) or 0) < oldest then
      -- No pass in the window (the string's left it, or it is no pass at
      -- all): this one is the window.
      redis.call('SET', key, pass, 'PX', window_s)
      return 1, 1
    end
    if otag == tag then
      return 2, 1
    end
    if limit <= 1 then
      return 0, 1
    end
    redis.call('DEL', key)
    redis.call('ZADD', key, ms, otag, now, tag)
    redis.call('PEXPIRE', key, window_s)
    return 1, 2
  end
  local count = redis.pcall('ZCOUNT', key, oldest, '+inf')
  if type(count) == 'table' then
    count = from_stream(key)
  end
  if count > 0 then
    local mine = redis.call('ZSCORE', key, tag)
    if mine and tonumber(mine) >= oldest then
      return 2, count
    end
    if count >= limit then
      return 0, count
    end
  end
  redis.call('ZADD', key, now, tag)
  if redis.call('ZCARD', key) > count + 1 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. oldest_s)
  end
  redis.call('PEXPIRE', key, window_s)
  return 1, count + 1
end

local out = {now}
for i = 1, #KEYS do
  local verdict, count = step(KEYS[i])
  out[i + 1] = verdict + 4 * count
end
return out
