-- Series: reminders that repeat (docs/scheduling.md "Series").
--
-- push_series: a task template (the content and push options a push_task
-- carries) and an RFC 5545 recurrence: rrule (an RRULE value without the
-- "RRULE:" name, e.g. 'FREQ=WEEKLY;BYDAY=MO,TU,WE,TH,FR;UNTIL=20270630T235959'),
-- dtstart (the first occurrence's wall-clock time in tz), exdate (wall-clock
-- times the rule skips, comma-separated 'YYYYMMDDTHHMMSS').  libical expands
-- the rule in wall-clock time; hr_tz turns a wall time into an instant in tz,
-- or, with local_time = 1, each recipient's zone does (the occurrence is a
-- local-time task).  The dispatcher (dispatcher/dsp_series.c) writes each
-- occurrence lead_s (NULL: dispatcher.series_lead_s) before it is due as an
-- ordinary push_task with series_id and occurrence_at.
--
-- Bookkeeping, written by herald only: next_at is the wall time of the next
-- occurrence not written yet (NULL before the first look), occurrences how
-- many were written, state active | paused | ended | failed (failed: the rule
-- or the template is refused, last_error says why; an admin fixes the row and
-- sets state = 'active' again).  catch_up: what the dispatcher does with
-- occurrences whose time passed unwritten (an outage): none = skip them,
-- latest = write only the last one, all = write every one.

CREATE TABLE IF NOT EXISTS push_series (
  id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  -- the template (push_task's columns of the same names)
  name              VARCHAR(200)  NOT NULL,
  topic             VARCHAR(100)  NOT NULL DEFAULT 'default',
  channel           VARCHAR(64)   NOT NULL,
  category          VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL DEFAULT 'reminder',
  title             TEXT          NOT NULL DEFAULT '',
  body              TEXT          NOT NULL DEFAULT '',
  payload           MEDIUMTEXT    NULL,
  rate_limit        INT           NOT NULL DEFAULT 0,
  chunk_size        INT           NOT NULL DEFAULT 5000,
  throttle_limit    INT           NOT NULL DEFAULT 0,
  throttle_window_s INT           NOT NULL DEFAULT 0,
  throttle_scope    VARCHAR(100)  NULL,
  throttle_key      VARCHAR(100)  NULL,
  throttle_mode     ENUM('enforce','shadow') NULL,
  ttl_s             INT           NULL,
  collapse_key      VARCHAR(255)  NULL,
  priority          ENUM('high','normal') NOT NULL DEFAULT 'high',
  window_start      TIME          NULL,
  window_end        TIME          NULL,
  window_tz         VARCHAR(64)   NULL,
  expire_after_s    INT           NULL COMMENT 'an occurrence expires this long after its due time; NULL = never',
  -- the recurrence
  rrule             VARCHAR(1000) NOT NULL,
  dtstart           DATETIME      NOT NULL COMMENT 'wall-clock time in tz',
  tz                VARCHAR(64)   NOT NULL DEFAULT 'UTC',
  exdate            VARCHAR(4000) NULL,
  local_time        TINYINT(1)    NOT NULL DEFAULT 0 COMMENT '1: each recipient''s zone; tz for those without one',
  catch_up          ENUM('none','latest','all') NOT NULL DEFAULT 'latest',
  lead_s            INT           NULL COMMENT 'NULL = dispatcher.series_lead_s',
  -- written by herald only
  state             ENUM('active','paused','ended','failed') NOT NULL DEFAULT 'active',
  last_error        VARCHAR(1000) NULL,
  next_at           DATETIME      NULL COMMENT 'wall time of the next occurrence not written',
  occurrences       BIGINT        NOT NULL DEFAULT 0,
  created_at        DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at        DATETIME(3)   NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY push_series_state (state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- An occurrence is an ordinary task with these two set: the unique key makes
-- a second write of the same occurrence (two dispatchers, a crash between
-- the insert and the bookkeeping, a retried insert) find the first one.
-- occurrence_at is the task's due_at as written (an instant, or a wall time
-- for a local-time occurrence).  NULLs are distinct: one-off tasks never
-- collide.
ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS series_id BIGINT UNSIGNED NULL DEFAULT NULL
    COMMENT 'the push_series this task is an occurrence of; NULL = a one-off task',
  ADD COLUMN IF NOT EXISTS occurrence_at DATETIME(3) NULL DEFAULT NULL
    COMMENT 'the occurrence''s time (due_at as written)',
  ADD UNIQUE KEY IF NOT EXISTS push_task_occurrence (series_id, occurrence_at);
