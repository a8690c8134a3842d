-- Expiry (docs/scheduling.md, "Expiry"): a reminder that can no longer be
-- useful is not sent.  expire_at NULL = never; otherwise a recipient not
-- pushed by then is counted `expired` instead (dispatcher: what is left in
-- subs and in chunks no worker holds; worker: the rest of a chunk it holds,
-- a retry that would land past it, a chunk redelivered after it).  A task
-- that wakes up after expire_at (the dispatchers were down) pushes nobody
-- and ends `done` with every subscription counted expired.  expire_at not
-- after due_at fails the task with last_error (hr_task_validate).

ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS expire_at DATETIME(3) NULL DEFAULT NULL
    COMMENT 'recipients not pushed by then count expired; NULL = never' AFTER due_at,
  ADD COLUMN IF NOT EXISTS expired BIGINT NOT NULL DEFAULT 0
    COMMENT 'recipients not pushed by expire_at' AFTER unregistered;

ALTER TABLE push_delivery
  MODIFY status ENUM('sent','failed','throttled','pulled','cancelled','unregistered','expired')
    NOT NULL;

ALTER TABLE push_chunk
  MODIFY state ENUM('published','done','parked','cancelled','expired') NOT NULL DEFAULT 'published';
