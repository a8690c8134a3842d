-- Per-locale variants of a task's content (docs/api.md "Variants", issue 32).
--
-- push_task's own title, body and payload are the default.  A row here is
-- the content of one locale: a recipient whose profile's locale is the
-- row's (or falls back to it: pt-BR, then pt) gets the row's title, body,
-- payload and, on an smtp channel, subject / text / html in place of the
-- channel's templates.  A NULL column takes the task's own (or the
-- channel's) value.  vkey names the variant in the counts and the API; it
-- is the locale (case as written), never 'default' (the task's own).
-- Rows may be written with raw SQL before the task is due: the workers
-- read them with the task (and check them like the task: a bad row fails
-- the task with last_error).
CREATE TABLE IF NOT EXISTS push_task_variant (
  id       BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
  task_id  BIGINT UNSIGNED NOT NULL,
  vkey     VARCHAR(35) CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL
    COMMENT 'the variant''s name: its locale, a BCP 47 tag; unique per task, case-insensitive',
  title    TEXT NULL COMMENT 'template; NULL = the task''s',
  body     TEXT NULL COMMENT 'template; NULL = the task''s',
  payload  MEDIUMTEXT NULL COMMENT 'JSON object; NULL = the task''s',
  subject  TEXT NULL COMMENT 'smtp: subject template; NULL = the channel''s',
  text     MEDIUMTEXT NULL COMMENT 'smtp: text part template; NULL = the channel''s',
  html     MEDIUMTEXT NULL COMMENT 'smtp: HTML part template; NULL = the channel''s',
  UNIQUE KEY task_vkey (task_id, vkey)
) ENGINE=InnoDB;

-- How many pushed recipients of a task got each outcome (sent, failed,
-- unregistered) with each variant ('default': the task's own content),
-- added by the workers' reporters as outcomes settle, in the transaction
-- of their delivery rows.  Like push_task_series it is a tally of the
-- outcome reports: push_task's counters stay the exact totals.
CREATE TABLE IF NOT EXISTS push_task_variant_count (
  task_id  BIGINT UNSIGNED NOT NULL,
  vkey     VARCHAR(35) CHARACTER SET ascii COLLATE ascii_general_ci NOT NULL,
  outcome  VARCHAR(32) NOT NULL COMMENT 'an event type: sent, failed, unregistered',
  n        BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (task_id, vkey, outcome)
) ENGINE=InnoDB;
