-- Sharded tasks (docs/architecture.md, "Sharded tasks"): a task's
-- subscribers split over `shards` Redis sets, each claimed and chunked by
-- any dispatcher.
--
-- shards: fixed before the first subscriber reaches Redis (a uid's set is
-- CRC32(uid) % shards, so changing it would leave recipients in the wrong
-- set); the trigger below refuses a change once the task has a
-- subscription or is no longer scheduled.  1 = one set under {t<ID>}, as
-- before this migration.  Validated by herald (1..256, not with local_time,
-- a send window or finish_by), so a bad value becomes a failed task with a
-- readable last_error.
--
-- push_task_shard: one row per shard of a task with shards > 1, written by
-- the dispatchers: the claim (state ready -> chunking -> chunked, owner,
-- lease) and the shard's outcome counters.  A counter written before the
-- task's reconciliation (a pull or a cancel before due) makes the row
-- `waiting`: it exists for its counters and no dispatcher claims it; the
-- reconciliation makes it `ready`.  The workers' counters are the
-- absolute values of one shard's stats hash, raised here with GREATEST;
-- push_task's counters are then set to the sum of the task's rows, so the
-- task row always reads as before.

ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS shards SMALLINT UNSIGNED NOT NULL DEFAULT 1
    COMMENT 'subscriber sets the task is split over (fixed before its first subscriber)'
    AFTER chunk_size;

CREATE TABLE IF NOT EXISTS push_task_shard (
  task_id      BIGINT UNSIGNED   NOT NULL,
  shard        SMALLINT UNSIGNED NOT NULL,
  state        ENUM('waiting','ready','chunking','chunked') NOT NULL DEFAULT 'waiting',
  claimed_by   VARCHAR(128)      NULL,
  lease_until  DATETIME(3)       NULL,
  sent         BIGINT            NOT NULL DEFAULT 0,
  failed       BIGINT            NOT NULL DEFAULT 0,
  throttled    BIGINT            NOT NULL DEFAULT 0,
  pulled       BIGINT            NOT NULL DEFAULT 0,
  cancelled    BIGINT            NOT NULL DEFAULT 0,
  retried      BIGINT            NOT NULL DEFAULT 0,
  unregistered BIGINT            NOT NULL DEFAULT 0,
  expired      BIGINT            NOT NULL DEFAULT 0,
  updated_at   DATETIME(3)       NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
                                 ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (task_id, shard),
  KEY push_task_shard_claim (state, lease_until)
) ENGINE=InnoDB;

DROP TRIGGER IF EXISTS push_task_shards_fixed;

CREATE TRIGGER push_task_shards_fixed BEFORE UPDATE ON push_task
FOR EACH ROW
BEGIN
  DECLARE msg VARCHAR(255);
  IF NOT (NEW.shards <=> OLD.shards) THEN
    IF OLD.state <> 'scheduled' THEN
      SET msg = CONCAT('push_task ', OLD.id, ' is ', OLD.state,
          ': shards can no longer change (it is fixed before the first subscriber)');
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
    END IF;
    IF EXISTS (SELECT 1 FROM push_subscription WHERE task_id = OLD.id) THEN
      SET msg = CONCAT('push_task ', OLD.id, ' has subscriptions: shards can no longer',
          ' change (a uid''s set is CRC32(uid) % shards)');
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
    END IF;
  END IF;
END;
