-- One BEFORE UPDATE trigger on push_task instead of two: the freeze rule of
-- 002_freeze_trigger.sql and the fixed shards of 010_shards.sql, with the
-- same refusals, the same messages and the freeze checked first (as the
-- older trigger fired first).
--
-- Why: every UPDATE of a task row runs its triggers, herald's own too (a
-- claim, a total, a dispatched mark, a counter report, a finish: five or six
-- per task, and a report per running task every tick), and MariaDB runs
-- each trigger as a stored program with its own set-up.  On 45,000 batched
-- counter updates of task rows (bench/task_guard.py) the two added 6.9 us
-- of MariaDB's CPU to a row update (14.4 against 7.6 with none), this one
-- 3.3 (docs/performance.md "One guard trigger on push_task").  The common
-- case, none of the guarded columns changed, is one IF of comparisons and
-- no variables; what is refused, and why, is worked out only when one of
-- them changed.
--
-- Texts are compared as BINARY: utf8mb4_bin pads with spaces, so a plain
-- comparison would let 'x' become 'x ' after the freeze.

DROP TRIGGER IF EXISTS push_task_freeze;
DROP TRIGGER IF EXISTS push_task_shards_fixed;
DROP TRIGGER IF EXISTS push_task_guard;

CREATE TRIGGER push_task_guard BEFORE UPDATE ON push_task
FOR EACH ROW
BEGIN
  IF NOT (NEW.due_at <=> OLD.due_at
          AND BINARY NEW.title <=> BINARY OLD.title
          AND BINARY NEW.body <=> BINARY OLD.body
          AND BINARY NEW.payload <=> BINARY OLD.payload
          AND NEW.shards <=> OLD.shards) THEN
    BEGIN
      -- The freeze: once freeze_at has passed (NULL = 00:00 UTC of the due
      -- day), the title, body, due_at and payload cannot change.
      DECLARE frozen_since DATETIME(3) DEFAULT
        COALESCE(OLD.freeze_at, CAST(DATE(OLD.due_at) AS DATETIME(3)));
      DECLARE msg VARCHAR(255) DEFAULT NULL;
      IF frozen_since IS NOT NULL AND UTC_TIMESTAMP(3) >= frozen_since
         AND NOT (NEW.due_at <=> OLD.due_at
                  AND BINARY NEW.title <=> BINARY OLD.title
                  AND BINARY NEW.body <=> BINARY OLD.body
                  AND BINARY NEW.payload <=> BINARY OLD.payload) THEN
        SET msg = CONCAT('push_task ', OLD.id, ' is frozen since ',
            DATE_FORMAT(frozen_since, '%Y-%m-%d %H:%i:%s'),
            ' UTC: title, body, due_at and payload can no longer change');
      -- shards: fixed before the first subscriber reaches Redis (a uid's
      -- set is CRC32(uid) % shards).
      ELSEIF NOT (NEW.shards <=> OLD.shards) THEN
        IF OLD.state <> 'scheduled' THEN
          SET msg = CONCAT('push_task ', OLD.id, ' is ', OLD.state,
              ': shards can no longer change (it is fixed before the first subscriber)');
        ELSEIF EXISTS (SELECT 1 FROM push_subscription WHERE task_id = OLD.id) THEN
          SET msg = CONCAT('push_task ', OLD.id, ' has subscriptions: shards can no longer',
              ' change (a uid''s set is CRC32(uid) % shards)');
        END IF;
      END IF;
      IF msg IS NOT NULL THEN
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
      END IF;
    END;
  END IF;
END;
