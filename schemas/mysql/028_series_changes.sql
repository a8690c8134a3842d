-- The changes of a series' subscriptions since an instant (docs/scheduling.md
-- "Subscribers of a series", common/hr_subs.c "the delta"): an occurrence's
-- set is filled with the series' subscribers before its claim, and the
-- claim applies only the uids whose row changed since that fill.  Every
-- change writes subscribed_at (a subscribe, a subscribe again, which also
-- copies the closed interval to push_series_subscription_past) or
-- unsubscribed_at (an unsubscribe), so the two indexes below find the
-- changes by a range read each, where the primary key would read every
-- subscriber of the series (1,000,000 rows between the claim and the first
-- push).
ALTER TABLE push_series_subscription
  ADD INDEX IF NOT EXISTS push_series_subscription_subscribed (series_id, subscribed_at),
  ADD INDEX IF NOT EXISTS push_series_subscription_unsubscribed (series_id, unsubscribed_at);
