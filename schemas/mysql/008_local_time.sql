-- Local-time sends and send windows (docs/scheduling.md, "Local time" and
-- "Quiet hours").
--
-- local_time = 1 reads due_at's wall-clock time (date and time of day) in
-- each recipient's zone: the attribute `tz` of herald:user:<uid> (an IANA
-- name), else default_tz, else UTC.  The dispatcher claims the task at the
-- earliest instant any zone reaches that wall time and releases every
-- zone's recipients at its own instant.
--
-- window_start / window_end (local times of day, both or neither; a window
-- may wrap midnight, e.g. 20:00..08:00) restrict delivery to that daily
-- window in window_tz, or in each recipient's zone when window_tz is NULL.
-- A recipient whose window is closed waits for its next opening.
--
-- Zone names are checked when the task is validated (hr_task_validate): an
-- unknown default_tz / window_tz fails the task with last_error.

ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS local_time TINYINT(1) NOT NULL DEFAULT 0
    COMMENT '1: due_at is a wall-clock time read in each recipient''s zone' AFTER priority,
  ADD COLUMN IF NOT EXISTS default_tz VARCHAR(64) NULL DEFAULT NULL
    COMMENT 'IANA zone of recipients without a tz attribute; NULL = UTC' AFTER local_time,
  ADD COLUMN IF NOT EXISTS window_start TIME NULL DEFAULT NULL
    COMMENT 'daily send window opens (local time); NULL = no window' AFTER default_tz,
  ADD COLUMN IF NOT EXISTS window_end TIME NULL DEFAULT NULL
    COMMENT 'daily send window closes (local time, exclusive)' AFTER window_start,
  ADD COLUMN IF NOT EXISTS window_tz VARCHAR(64) NULL DEFAULT NULL
    COMMENT 'zone of the window; NULL = each recipient''s zone' AFTER window_end;
