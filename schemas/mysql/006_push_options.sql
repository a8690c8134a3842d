-- A task's push options (docs/providers.md, "Push options"), handed to the
-- providers that know them: FCM's android ttl / collapse_key / priority and
-- APNs' apns-expiration / apns-collapse-id / apns-priority.  Webhook and
-- smtp channels ignore them.
--
-- ttl_s NULL leaves the provider's default; 0..2419200 (FCM's 28 days) is
-- how long the provider keeps an undelivered push.  collapse_key NULL means
-- none; at most 64 bytes on one line (APNs' limit).  A value an admin wrote
-- by hand outside those rules fails the task with last_error
-- (hr_task_validate), like any other bad column.

ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS ttl_s INT NULL DEFAULT NULL
    COMMENT 'seconds a provider keeps an undelivered push; NULL = its default' AFTER throttle_mode,
  ADD COLUMN IF NOT EXISTS collapse_key VARCHAR(255) NULL DEFAULT NULL
    COMMENT 'FCM collapse_key / apns-collapse-id; NULL = none' AFTER ttl_s,
  ADD COLUMN IF NOT EXISTS priority ENUM('high','normal') NOT NULL DEFAULT 'high'
    COMMENT 'FCM HIGH / apns-priority 10, or NORMAL / 5' AFTER collapse_key;
