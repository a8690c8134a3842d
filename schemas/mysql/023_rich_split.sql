-- Rich and silent pushes (docs/providers.md "Rich and silent pushes", issue
-- 32): a task's image, action buttons, sound, badge, thread (group),
-- mutable-content and APNs category, or a silent (data-only / background)
-- push, as one JSON object the providers' payload builders map per channel
-- type.  NULL is a plain push.  A value an admin wrote by hand that
-- hr_rich_parse refuses fails the task with last_error, like any other bad
-- column.
ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS rich TEXT NULL DEFAULT NULL
    COMMENT 'JSON: image, buttons, sound, badge, thread, category, mutable_content, silent';

-- A/B tests (docs/api.md "A/B tests"): a variant row with a split is an arm
-- of the task's test, split percent of its recipients (by a hash of task
-- and uid), vkey its name; NULL: a per-locale variant (022_variants.sql).
ALTER TABLE push_task_variant
  ADD COLUMN IF NOT EXISTS split TINYINT UNSIGNED NULL DEFAULT NULL
    COMMENT 'an A/B arm''s percentage 1..100; NULL = a locale variant' AFTER task_id;
