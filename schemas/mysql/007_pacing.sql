-- Pacing and admission control (docs/scheduling.md, "Finish-by pacing" and
-- "Admission control and the channel budget").
--
-- finish_by NULL: the task runs at its rate_limit (or its channel's).  Set:
-- herald derives the rate so that the campaign ends by then (remaining
-- recipients / time left, re-derived every few seconds while the task is
-- chunked), never above rate_limit nor the channel's rate_limit.  A
-- finish_by not after due_at fails the task with last_error.
--
-- last_warning: written by herald's admission control when the task is
-- created (API) or first seen by a dispatcher's scan (raw SQL): the
-- channel's budget around its due time is overbooked, or finish_by cannot
-- be met.  A warning, never a refusal: the task stays scheduled.  NULL =
-- nothing to warn about.

ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS finish_by DATETIME(3) NULL DEFAULT NULL
    COMMENT 'pace the task to end by then; NULL = no pacing' AFTER priority,
  ADD COLUMN IF NOT EXISTS last_warning VARCHAR(1000) NULL DEFAULT NULL
    COMMENT 'admission control: overbooked channel or finish_by out of reach' AFTER finish_by;
