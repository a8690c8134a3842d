-- The freeze rule, enforced by the database so that raw SQL admins get it too:
-- once freeze_at has passed (NULL = 00:00 UTC of the due day), the title,
-- body, due_at and payload of a task cannot change.  herald's own updates
-- (state, counters, leases) never touch these columns.

DROP TRIGGER IF EXISTS push_task_freeze;

CREATE TRIGGER push_task_freeze BEFORE UPDATE ON push_task
FOR EACH ROW
BEGIN
  DECLARE frozen_since DATETIME(3);
  SET frozen_since = COALESCE(OLD.freeze_at, CAST(DATE(OLD.due_at) AS DATETIME(3)));
  IF frozen_since IS NOT NULL AND UTC_TIMESTAMP(3) >= frozen_since
     AND (NOT (NEW.title <=> OLD.title) OR NOT (NEW.body <=> OLD.body)
          OR NOT (NEW.due_at <=> OLD.due_at) OR NOT (NEW.payload <=> OLD.payload)) THEN
    SET @herald_freeze_msg = CONCAT('push_task ', OLD.id, ' is frozen since ',
        DATE_FORMAT(frozen_since, '%Y-%m-%d %H:%i:%s'),
        ' UTC: title, body, due_at and payload can no longer change');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = @herald_freeze_msg;
  END IF;
END;
