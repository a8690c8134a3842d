-- The subscription guard: a subscription can only be added while its task is
-- `scheduled`, and every one added before the claim reaches the Redis set.
--
-- Why a trigger: admins load subscribers with raw SQL as well as through the
-- API and heraldctl, and a row that MySQL accepts after the dispatcher took
-- the task would be stored and never pushed.  The trigger reads the task row
-- under a shared lock, so it and the claim (an UPDATE of that row, which
-- takes an exclusive lock) serialise: an INSERT whose transaction is open
-- holds the claim back until it commits, and an INSERT after the claim sees
-- the task's new state and fails with the error below.
--
-- Epochs make the reconciliation between push_subscription and the Redis
-- set cheap and exact (docs/architecture.md, "Prepare and reconcile"): the
-- trigger stamps each row with its task's current subs_epoch; a sync bumps
-- subs_epoch (waiting, through the same lock, for inserters in flight), then
-- reads the rows of the epochs it has not synced yet through the
-- (task_id, epoch) index and adds them to the set.  So a sync costs what
-- changed since the last one, not the task's size, and no DELETE or
-- Redis-only member can hide a new row the way comparing counts could.

ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS subs_epoch BIGINT NOT NULL DEFAULT 0
    COMMENT 'bumped by every sync of the subscriber set; stamped on new subscriptions',
  ADD COLUMN IF NOT EXISTS unaccounted BIGINT NOT NULL DEFAULT 0
    COMMENT 'subscriptions with no outcome when the task finished (0 = all accounted for)';

ALTER TABLE push_subscription
  ADD COLUMN IF NOT EXISTS epoch BIGINT NOT NULL DEFAULT 0
    COMMENT 'push_task.subs_epoch when the row was added (set by the trigger)',
  ADD KEY IF NOT EXISTS push_subscription_epoch (task_id, epoch);

DROP TRIGGER IF EXISTS push_subscription_guard;
DROP TRIGGER IF EXISTS push_subscription_guard_move;

CREATE TRIGGER push_subscription_guard BEFORE INSERT ON push_subscription
FOR EACH ROW
BEGIN
  DECLARE st VARCHAR(16) DEFAULT NULL;
  DECLARE ep BIGINT DEFAULT 0;
  DECLARE since DATETIME(3) DEFAULT NULL;
  DECLARE msg VARCHAR(255);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET st = NULL;
  SELECT state, subs_epoch, COALESCE(finished_at, started_at, updated_at)
    INTO st, ep, since
    FROM push_task WHERE id = NEW.task_id LOCK IN SHARE MODE;
  IF st IS NULL THEN
    SET msg = CONCAT('push_task ', NEW.task_id,
        ' does not exist: create the task before its subscriptions');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF st <> 'scheduled' THEN
    SET msg = CONCAT('push_task ', NEW.task_id, ' is ', st, ' since ',
        DATE_FORMAT(since, '%Y-%m-%d %H:%i:%s'),
        ' UTC: subscriptions can only be added while it is scheduled',
        ' (uid ', NEW.uid, ' refused; use a new task)');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  SET NEW.epoch = ep;
END;

-- Moving a row to another task or uid is an insert into that task.
CREATE TRIGGER push_subscription_guard_move BEFORE UPDATE ON push_subscription
FOR EACH ROW
BEGIN
  DECLARE st VARCHAR(16) DEFAULT NULL;
  DECLARE ep BIGINT DEFAULT 0;
  DECLARE msg VARCHAR(255);
  DECLARE CONTINUE HANDLER FOR NOT FOUND SET st = NULL;
  IF NEW.task_id <> OLD.task_id OR NEW.uid <> OLD.uid THEN
    SELECT state, subs_epoch INTO st, ep
      FROM push_task WHERE id = NEW.task_id LOCK IN SHARE MODE;
    IF st IS NULL OR st <> 'scheduled' THEN
      SET msg = CONCAT('push_task ', NEW.task_id, ' is ', COALESCE(st, 'missing'),
          ': subscriptions can only be added while it is scheduled');
      SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
    END IF;
    SET NEW.epoch = ep;
  ELSE
    SET NEW.epoch = OLD.epoch;
  END IF;
END;
