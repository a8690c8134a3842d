-- Categories and the consent outcomes (docs/recipients.md).  A task has a
-- category (recipients.categories in herald.yaml declares them and which
-- are mandatory; an undeclared one fails the task with last_error).  Two
-- new outcomes, counted like the others (the stats hash, raised into
-- push_task and push_task_shard with GREATEST, one push_delivery row per
-- uid): opted_out (the user opted out of the category, or of the channel
-- type, or both) and suppressed (every address of the uid on the channel
-- is on the suppression list).
ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS category VARCHAR(32) CHARACTER SET ascii COLLATE ascii_bin NOT NULL
    DEFAULT 'reminder' COMMENT 'recipients.categories; mandatory ones skip opt-outs and quiet hours',
  ADD COLUMN IF NOT EXISTS opted_out BIGINT NOT NULL DEFAULT 0
    COMMENT 'recipients who opted out of the category or the channel type',
  ADD COLUMN IF NOT EXISTS suppressed BIGINT NOT NULL DEFAULT 0
    COMMENT 'recipients whose every address on the channel is suppressed';

ALTER TABLE push_task_shard
  ADD COLUMN IF NOT EXISTS opted_out BIGINT NOT NULL DEFAULT 0 AFTER expired,
  ADD COLUMN IF NOT EXISTS suppressed BIGINT NOT NULL DEFAULT 0 AFTER opted_out;

ALTER TABLE push_delivery
  MODIFY status ENUM('sent','failed','throttled','pulled','cancelled','unregistered','expired',
                     'opted_out','suppressed') NOT NULL;
