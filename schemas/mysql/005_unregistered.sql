-- The `unregistered` outcome (docs/api.md, "Progress"): a recipient whose
-- every address on the task's channel is dead (the provider said
-- UNREGISTERED / BadDeviceToken / 5.1.1, and the address was pruned from
-- push_address and Redis) or who has no address on it at all.  Counted like
-- the other outcomes: the stats hash's 'unregistered' field, raised into
-- push_task.unregistered by the workers, one push_delivery row per uid.

ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS unregistered BIGINT NOT NULL DEFAULT 0
    COMMENT 'recipients with no live address on the channel' AFTER throttled;

ALTER TABLE push_delivery
  MODIFY status ENUM('sent','failed','throttled','pulled','cancelled','unregistered') NOT NULL;
