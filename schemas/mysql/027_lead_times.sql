-- Lead times per subscription (docs/scheduling.md "Lead times", issue 29
-- item 4a): "remind me 1 day before" and "15 minutes before" the same event.
--
-- push_task.event_at is the event the reminders are relative to;
-- push_subscription.lead_s the seconds before it that subscription's push
-- is released (NULL = the task's own send time, due_at).  Each distinct
-- lead is a wave of the task: the owner's plan, after the claim, reads the
-- task's rows with a lead from MySQL (the subscriptions are frozen then)
-- and parks those recipients on the task's wait set scored event_at -
-- lead_s (dispatcher/dsp_wait.c).  A wave before the claim fires at the
-- claim; one after expire_at is counted expired; a lead on a task without
-- event_at is no lead.  One lead per subscription: one push per (task, uid).
ALTER TABLE push_task
  ADD COLUMN IF NOT EXISTS event_at DATETIME(3) NULL DEFAULT NULL
    COMMENT 'the event subscriptions'' lead_s count back from; NULL = no lead times';

ALTER TABLE push_subscription
  ADD COLUMN IF NOT EXISTS lead_s INT NULL DEFAULT NULL
    COMMENT 'seconds before push_task.event_at this recipient is pushed; NULL = at due_at',
  ADD CONSTRAINT IF NOT EXISTS push_subscription_lead CHECK (lead_s IS NULL OR lead_s >= 0);
