-- wrk-post.lua: the push herald's webhook channel sends (schemas of the local
-- stack's herald.yaml), one distinct uid per request, so wrk measures the same
-- HTTP work the workers make the sink do: POST, JSON body, keep-alive.
--   wrk -t2 -c512 -d10s -s bench/wrk-post.lua http://127.0.0.1:19199/push
local n = 0
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"

request = function()
    n = n + 1
    local uid = 9000000000 + n
    local body = string.format(
        '{"uid":"%d","title":"Your reminder","body":"Hello %d, the live show starts now"}', uid, uid)
    return wrk.format(nil, "/push", nil, body)
end
