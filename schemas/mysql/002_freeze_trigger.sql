-- The freeze rule, enforced by the database so that raw SQL admins get it too:
-- once freeze_at has passed (NULL = 00:00 UTC of the due day), the title,
-- body, due_at and payload of a task cannot change.  herald's own updates
-- (state, counters, leases) never touch these columns.
--
-- Texts are compared as BINARY: utf8mb4_bin pads with spaces, so a plain
-- comparison would let 'x' become 'x ' after the freeze.

DROP TRIGGER IF EXISTS push_task_freeze;

CREATE TRIGGER push_task_freeze BEFORE UPDATE ON push_task
FOR EACH ROW
BEGIN
  DECLARE frozen_since DATETIME(3);
  DECLARE msg VARCHAR(255);
  SET frozen_since = COALESCE(OLD.freeze_at, CAST(DATE(OLD.due_at) AS DATETIME(3)));
  IF frozen_since IS NOT NULL AND UTC_TIMESTAMP(3) >= frozen_since
     AND (NOT (BINARY NEW.title <=> BINARY OLD.title)
          OR NOT (BINARY NEW.body <=> BINARY OLD.body)
          OR NOT (NEW.due_at <=> OLD.due_at)
          OR NOT (BINARY NEW.payload <=> BINARY OLD.payload)) THEN
    SET msg = CONCAT('push_task ', OLD.id, ' is frozen since ',
        DATE_FORMAT(frozen_since, '%Y-%m-%d %H:%i:%s'),
        ' UTC: title, body, due_at and payload can no longer change');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
END;
