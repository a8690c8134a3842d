-- job_set: write fields of an API job's record and keep it for its
-- retention, in one step, so no record is ever left without an expiry
-- (dispatcher/dsp_api_job.c).  KEYS[1] the record (hr_key_job);
-- ARGV[1] its retention in ms; ARGV[2..] field, value pairs.
-- Returns the number of fields written.
local n = 0
for i = 2, #ARGV - 1, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  n = n + 1
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return n
