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
