-- The delivery log partitioned by day (docs/architecture.md "The delivery
-- log's partitions", docs/operations.md "Delivery log retention").
--
-- push_delivery gets the column `day`, the partition key: DATE(due_at) of
-- the row's task (UTC), written by herald with every row (the workers'
-- reporter, the pull).  A task's rows all share its day, so one row per
-- (task, uid) stays true — the primary key becomes (task_id, uid, day) only
-- because MariaDB wants the partition key in every unique key — and a
-- reader prunes to one partition with `day = DATE(due_at)`.  due_at can no
-- longer change once the first row exists: workers push a task only after
-- its claim, and the pull serves frozen tasks only (002_freeze_trigger.sql).
--
-- One RANGE COLUMNS partition per day, `pYYYYMMDD` holding the days up to
-- and including YYYY-MM-DD, plus `pmax` (MAXVALUE).  The dispatchers
-- (dispatcher/dsp_dlog.c, under the lease below) create a week of
-- partitions ahead, by splitting pmax (empty then, so nothing is copied),
-- and drop the partitions older than dispatcher.delivery_retention_days:
-- whole files, never a DELETE.  No insert can fail for want of a
-- partition: a day before the oldest partition falls into the oldest one,
-- a day after the newest into pmax.
--
-- `day` defaults to 9999-12-31 (pmax): a row written without it, by a
-- release that predates this file (during a rolling upgrade) or by hand,
-- still goes in, and the dispatchers (and recover, before it reads a task's
-- rows) move it to its task's day (hr_dlog_settle).
--
-- Converting an existing log does not copy it here.  push_delivery is
-- renamed push_delivery_legacy and an empty partitioned table takes its
-- place in one RENAME (atomic; it waits only for the statements running on
-- the table), so the migration takes the same moment for a billion rows as
-- for none, writers never wait for a copy, and the migration Job's
-- deadline holds.  The dispatchers then copy the legacy rows of the tasks
-- due within the retention into their days in the background, in batches,
-- newest row winning (INSERT IGNORE: a row written since the rename is
-- newer), and drop push_delivery_legacy when done; rows of tasks due
-- before the retention are not copied.  Until then recover refuses a task
-- whose rows are still only in the legacy table (hr_dlog_ready).  What
-- the copy costs is in docs/operations.md.
--
-- Statements that run twice change nothing (a migration that stopped half
-- way is run again whole).

-- Cluster-wide background jobs of the dispatchers: who holds the job's
-- lease, until when (the database's clock), and where the job stands.
CREATE TABLE IF NOT EXISTS push_job (
  name        VARCHAR(64)   NOT NULL,
  owner       VARCHAR(192)  NOT NULL,
  lease_until DATETIME(3)   NOT NULL,
  progress    VARCHAR(255)  NULL COMMENT 'the job''s cursor, its own format',
  PRIMARY KEY (name)
) ENGINE=InnoDB;

-- Every delivery log partition dropped, written before its DROP: recover
-- refuses a task due on or before the newest of these days, because its
-- rows may be gone.
CREATE TABLE IF NOT EXISTS push_delivery_dropped (
  day        DATE            NOT NULL COMMENT 'the partition''s last day (it held the tasks due then and before)',
  rows_est   BIGINT UNSIGNED NOT NULL COMMENT 'information_schema.PARTITIONS.TABLE_ROWS (an estimate)',
  bytes      BIGINT UNSIGNED NOT NULL COMMENT 'data + index bytes',
  dropped_at DATETIME(3)     NOT NULL,
  dropped_by VARCHAR(192)    NOT NULL,
  PRIMARY KEY (day)
) ENGINE=InnoDB;

-- Tasks `heraldctl purge` has removed from push_task whose other rows and
-- Redis keys it has not finished deleting: a purge run again finishes
-- them first (hr_purge.c).
CREATE TABLE IF NOT EXISTS push_purge (
  task_id   BIGINT UNSIGNED   NOT NULL,
  day       DATE              NOT NULL COMMENT 'the task''s delivery log day',
  shards    SMALLINT UNSIGNED NOT NULL,
  purged_at DATETIME(3)       NOT NULL,
  PRIMARY KEY (task_id)
) ENGINE=InnoDB;

BEGIN NOT ATOMIC
  DECLARE today DATE DEFAULT UTC_DATE();
  IF NOT EXISTS (SELECT 1 FROM information_schema.PARTITIONS
                 WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'push_delivery'
                   AND PARTITION_NAME IS NOT NULL) THEN
    DROP TABLE IF EXISTS push_delivery_next;
    -- LIKE keeps whatever earlier migrations made of the table.
    CREATE TABLE push_delivery_next LIKE push_delivery;
    EXECUTE IMMEDIATE CONCAT(
      'ALTER TABLE push_delivery_next ',
      'ADD COLUMN day DATE NOT NULL DEFAULT ''9999-12-31'' COMMENT ',
      '''DATE(push_task.due_at) of the task (UTC): the partition key; the default marks ',
      'a row written without it, moved to its day by the dispatchers'', ',
      'DROP PRIMARY KEY, ADD PRIMARY KEY (task_id, uid, day) ',
      'PARTITION BY RANGE COLUMNS(day) (',
      'PARTITION p', DATE_FORMAT(today, '%Y%m%d'),
      ' VALUES LESS THAN (''', DATE_FORMAT(today + INTERVAL 1 DAY, '%Y-%m-%d'), '''), ',
      'PARTITION pmax VALUES LESS THAN (MAXVALUE))');
    RENAME TABLE push_delivery TO push_delivery_legacy, push_delivery_next TO push_delivery;
  END IF;
END;
