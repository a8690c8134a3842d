-- Events (docs/architecture.md "Events", docs/api.md "Funnels"): what
-- happened after the send, counted per task.
--
-- push_engagement: one row per recipient who opened (the e-mail pixel, or
-- the app through POST /v1/users/{uid}/events) or clicked (an e-mail link
-- through the signed redirect) a task's push.  Its key makes an engagement
-- count once per recipient however often the pixel loads or the link is
-- followed; the dispatcher inserts it (INSERT IGNORE) in the transaction
-- that adds the engagement to the series.  kind is a string so that new
-- engagements need no migration.
--
-- push_task_series: per task, channel, outcome and UTC minute, how many
-- recipients got that outcome (sent, failed, throttled, unregistered,
-- expired, cancelled: the workers' reporters, as outcomes settle; pulled,
-- opened, clicked: the dispatcher).  outcome is the event type's name
-- (hr_event.h), a string: issue 28's opted_out and suppressed join without
-- a migration.  The funnel's totals of opened and clicked are sums of it
-- (written with their push_engagement row, so exact); sent, delivered
-- (pulled) and the other outcomes' totals come from push_task's counters,
-- the series gives their time course (a worker killed before its report
-- loses its last minute's increments there, never from the counters).

CREATE TABLE IF NOT EXISTS push_engagement (
  task_id BIGINT UNSIGNED NOT NULL,
  kind    VARCHAR(32)     NOT NULL COMMENT 'opened, clicked',
  uid     BIGINT UNSIGNED NOT NULL,
  at      DATETIME(3)     NOT NULL COMMENT 'the first time',
  PRIMARY KEY (task_id, kind, uid)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS push_task_series (
  task_id BIGINT UNSIGNED NOT NULL,
  channel VARCHAR(64)     NOT NULL,
  outcome VARCHAR(32)     NOT NULL COMMENT 'an event type: sent, failed, ..., opened, clicked',
  minute  DATETIME        NOT NULL COMMENT 'UTC, seconds zero',
  n       BIGINT UNSIGNED NOT NULL DEFAULT 0,
  PRIMARY KEY (task_id, channel, outcome, minute)
) ENGINE=InnoDB;
